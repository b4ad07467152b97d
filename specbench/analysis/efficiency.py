"""How close a switching server comes to the static curves it switches between, and the tax.

* :func:`relative_to_best`: a configuration's tok/s over the best of some static curves at each
  level it measured. Where both points have per-request rows the ratio comes from the durations
  of the same requests (`paired`, :meth:`PairedRequests.ratio`): at low concurrency a window
  holds a dozen requests, and one pushed past its end by a timing hiccup moves the windows'
  ratio by 5% while the servers ran alike. Between servers that differ much the paired ratio is
  pulled toward 1 (on the simulator by 1-4%: the requests both finished inside the window are
  the shorter ones, whose time to first token weighs more), so it suits these efficiencies,
  where a server is compared with the one it runs like, and leaves `vs_sglang_default` about
  1% conservative (the crossing keeps the windows' ratio). A level between the static curves'
  levels (the T-1, T, T+1 straddle levels of a dynamic server) uses the static curves
  interpolated log-log and is listed as interpolated; a level outside them has no value.
* :func:`tax`: 1 - zero-step / baseline per level: what one adaptive server pays for keeping the
  speculative path when it drafts nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from specbench.analysis.curves import value_at


@dataclass(frozen=True)
class Relative:
    """A configuration's tok/s relative to the best of other curves, per level."""

    by_level: dict[str, float]
    interpolated: list[int]
    outside: list[int]
    # At each level every curve measured: the curve the ratio is to (the one it comes closest
    # to losing to).
    closest: dict[int, str] = field(default_factory=dict)

    @property
    def minimum(self) -> float | None:
        return min(self.by_level.values()) if self.by_level else None


Paired = Callable[[str, int], float | None]  # (curve name, level) -> ratio from requests


def relative_to_best(
    values: Mapping[int, float], curves: Mapping[str, Mapping[int, float]],
    paired: Paired | None = None,
) -> Relative:
    """values[c] / max over the named `curves` at c (see the module docstring).

    At a level every curve measured, the result is the smallest ratio to any curve, each
    taken from `paired` where it has one; that is values / max(curves) when none is paired.
    """
    by_level: dict[str, float] = {}
    interpolated: list[int] = []
    outside: list[int] = []
    closest: dict[int, str] = {}
    if not curves:
        return Relative(by_level, interpolated, outside)
    for c, tok_s in sorted(values.items()):
        at = {name: value_at(curve, c) for name, curve in curves.items()}
        if any(v is None for v in at.values()):
            outside.append(c)
            continue
        if any(c not in curve for curve in curves.values()):
            interpolated.append(c)
            best = max(v for v in at.values() if v is not None)
            if best > 0:
                by_level[str(c)] = round(tok_s / best, 4)
            continue
        ratios = {name: _ratio(tok_s, curve[c], None if paired is None else paired(name, c))
                  for name, curve in curves.items()}
        known = {name: r for name, r in ratios.items() if r is not None}
        if known:
            closest[c] = min(known, key=lambda name: known[name])
            by_level[str(c)] = round(known[closest[c]], 4)
    return Relative(by_level, interpolated, outside, closest)


def _ratio(tok_s: float, other: float, paired: float | None) -> float | None:
    if paired is not None:
        return paired
    return tok_s / other if other > 0 else None


def tax(zero_step: Mapping[int, float], baseline: Mapping[int, float]) -> dict[str, float]:
    """1 - zero-step / baseline at each level both measured."""
    return {str(c): round(1.0 - zero_step[c] / baseline[c], 4)
            for c in sorted(set(zero_step) & set(baseline)) if baseline[c] > 0}


def plain_advantage(
    baseline: Mapping[int, float], speculative: Sequence[Mapping[int, float]],
    levels: Sequence[int],
) -> dict[str, float]:
    """baseline / best speculative configuration - 1 at `levels` (where all were measured):
    how much faster a separate plain server is than any one speculative server there."""
    out: dict[str, float] = {}
    for c in levels:
        best = [curve[c] for curve in speculative if c in curve]
        if c in baseline and best and max(best) > 0:
            out[str(c)] = round(baseline[c] / max(best) - 1.0, 4)
    return out
