"""specbench.stats: time slices, batch means, the autocorrelation factor and ratio draws."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specbench import stats


def test_slices_add_up_to_the_window() -> None:
    rng = np.random.default_rng(0)
    chunk_t, chunk_tokens = [], []
    for _ in range(20):
        t = np.sort(rng.uniform(-2.0, 12.0, 30))
        chunk_t.append(t)
        chunk_tokens.append(np.cumsum(rng.integers(1, 5, 30)))
    rates = stats.slice_rates(chunk_t, chunk_tokens, 10.0)
    assert len(rates) == stats.N_SLICES
    total = sum(np.interp(10.0, t, k, left=0.0) - np.interp(0.0, t, k, left=0.0)
                for t, k in zip(chunk_t, chunk_tokens, strict=True))
    assert rates.mean() == pytest.approx(total / 10.0)
    assert stats.slice_rates([], [], 10.0).tolist() == [0.0] * 10
    assert len(stats.slice_rates(chunk_t, chunk_tokens, 0.0)) == 0


def test_batch_means_standard_error() -> None:
    rates = np.array([9.0, 11.0, 10.0, 12.0, 8.0])
    bm = stats.batch_means(rates)
    assert bm.mean == 10.0 and bm.n == 5
    assert bm.se == pytest.approx(rates.std(ddof=1) / math.sqrt(5))
    assert math.isnan(stats.batch_means(np.array([3.0])).se)
    assert stats.batch_means(np.empty(0)).n == 0


def test_lag1_autocorrelation() -> None:
    assert stats.lag1_autocorrelation(np.array([1.0, -1.0] * 10)) == pytest.approx(-0.95)
    smooth = np.sin(np.linspace(0, math.pi, 20))
    assert stats.lag1_autocorrelation(smooth) > 0.7
    assert math.isnan(stats.lag1_autocorrelation(np.ones(10)))
    assert math.isnan(stats.lag1_autocorrelation(np.array([1.0, 2.0])))


def test_ar1_inflation() -> None:
    # -1/n is what independent slices give on average: no widening.
    assert stats.ar1_inflation(-0.1, 10) == pytest.approx(1.0)
    assert stats.ar1_inflation(-0.6, 10) == 1.0  # negative correlation never narrows
    rho = (10 * 0.5 + 1) / 7  # Kendall's bias correction of the sample lag-1
    assert stats.ar1_inflation(0.5, 10) == pytest.approx(math.sqrt((1 + rho) / (1 - rho)))
    assert stats.ar1_inflation(0.99, 10) == pytest.approx(math.sqrt(1.9 / 0.1))  # clipped
    assert stats.ar1_inflation(float("nan"), 10) == 1.0


def test_ar1_inflation_matches_the_spread_of_means_of_correlated_series() -> None:
    # AR(1) slices with rho = 0.6: batch means alone understate the error of the mean; with
    # the factor (from the mean lag-1 estimate) they are about right.
    rng = np.random.default_rng(1)
    rho, n, trials = 0.6, 10, 4000
    x = np.zeros((trials, n))
    x[:, 0] = rng.standard_normal(trials) / math.sqrt(1 - rho ** 2)
    for i in range(1, n):
        x[:, i] = rho * x[:, i - 1] + rng.standard_normal(trials)
    naive = np.mean([stats.batch_means(row).se for row in x])
    lag1 = float(np.mean([stats.lag1_autocorrelation(row) for row in x]))
    true_se = float(x.mean(axis=1).std())
    assert naive < 0.75 * true_se
    widened = naive * stats.ar1_inflation(lag1, n)
    assert abs(widened - true_se) < abs(naive - true_se) / 2
    assert widened == pytest.approx(true_se, rel=0.3)


def test_log_ratio_draws_are_seeded_and_centred() -> None:
    def draw(seed: int) -> np.ndarray:
        return stats.draw_log_ratios([0.0, math.log(2.0)], [0.01, 0.1], [0, 3],
                                     np.random.default_rng(seed), 5000)

    a = draw(4)
    assert np.array_equal(a, draw(4))
    assert a.shape == (5000, 2)
    assert float(np.median(a[:, 1])) == pytest.approx(2.0, rel=0.02)
    assert float(np.log(a[:, 0]).std()) == pytest.approx(0.01, rel=0.1)
    # t with 3 degrees of freedom has heavier tails than the normal.
    assert float(np.log(a[:, 1]).std()) > 0.1


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(0.3, 3.0), min_size=2, max_size=9))
def test_crossing_rule_agrees_between_one_curve_and_many(ratios: list[float]) -> None:
    levels = [2 ** i for i in range(len(ratios))]
    one = stats.find_crossing(levels, ratios)
    code, c_star, _ = stats.crossings(np.log2(np.asarray(levels, dtype=float)),
                                      np.asarray([ratios, ratios]))
    assert stats.OUTCOMES[int(code[0])] == one.outcome
    if one.crossover_concurrency is not None:
        assert c_star[1] == pytest.approx(one.crossover_concurrency)
