"""One prompt set's analysis: both decisions, the efficiencies, the tax and the schedule."""

from __future__ import annotations

from specbench.analysis import context, text
from specbench.analysis import schedule as schedule_mod
from specbench.analysis.crossover import ONE_SERVER, PLAIN, Grid, decide, shared_levels
from specbench.analysis.curves import AnalysisError, LevelStats, level_stats, mean_by_level, means
from specbench.analysis.efficiency import Relative, plain_advantage, relative_to_best, tax
from specbench.analysis.intervals import PairedRequests
from specbench.analysis.launches import ratio_sd
from specbench.config import DEFAULT_CONCURRENCY
from specbench.results import Run
from specbench.results.analysis import (
    BetweenLaunch,
    OneServer,
    PlainServer,
    PromptSetAnalysis,
    ShortLevel,
)

DYNAMIC = "dynamic"
# The efficiency a switching server should hold at every level: within 3% of the better static
# curve (about the spread of one point between launches).
E_TARGET = 0.97


NO_BASELINE = ("no baseline curve: the plain-server crossover needs one (add baseline to "
               "--modes)")


def grid_of(run: Run) -> Grid:
    """The run's grid and who chose its levels (the notes advise levels only on a user's)."""
    cfg = run.manifest.config
    return Grid.of(cfg.concurrency, cfg.plan, DEFAULT_CONCURRENCY)


def _static(run: Run, prompt_set: str, inflation: float) -> dict[str, dict[int, LevelStats]]:
    """EAGLE-3's, the baseline's and zero-step's levels; the baseline may be missing where
    zero-step is measured (`--modes eagle3,zero-step` decides the one-server threshold alone)."""
    stats = {mode: level_stats(run.summary, mode, prompt_set, inflation)
             for mode in (PLAIN.den, PLAIN.num, ONE_SERVER.den)}
    needed = [PLAIN.num] if stats[ONE_SERVER.den] else [PLAIN.num, PLAIN.den]
    for mode in needed:
        if not stats[mode]:
            raise AnalysisError(
                f"prompt set {prompt_set!r} has no {mode} points in {run.path}; measure them with "
                f"`specbench sweep --modes baseline,eagle3 --resume {run.path}`"
            )
    return stats


def _one_server(
    run: Run, prompt_set: str, spec: dict[int, LevelStats], zero: dict[int, LevelStats], *,
    seed: int, resamples: int, requests: PairedRequests, between: BetweenLaunch | None = None,
) -> OneServer:
    """EAGLE-3 vs the zero-step curve, and the dynamic server's efficiency against both."""
    notes: list[str] = []
    try:
        levels = shared_levels(ONE_SERVER, prompt_set, spec, zero, str(run.path), notes)
    except AnalysisError as exc:
        why = ("no zero-step curve: the one-server threshold needs one (add zero-step to "
               "--modes)") if not zero else str(exc)
        return {"outcome": None, "crossover_concurrency": None, "interval": None,
                "threshold_batch_size": None, "efficiency": {}, "notes": [
                    f"{why}; the threshold falls back to the baseline crossover"]}
    out: OneServer = {**decide(
        run.summary, prompt_set, ONE_SERVER, (spec, zero), levels, seed=seed + 1,
        resamples=resamples, requests=requests, grid=grid_of(run),
        launch_sd=ratio_sd(between, prompt_set, ONE_SERVER.num, ONE_SERVER.den))}
    out["notes"] = notes + out["notes"]
    dynamic = mean_by_level(run.summary, DYNAMIC, prompt_set, "output_tok_s")
    relative = relative_to_best(dynamic, {ONE_SERVER.num: means(spec), ONE_SERVER.den: means(zero)},
                                paired=requests.versus(DYNAMIC, prompt_set))
    # A dynamic level outside both static curves has no value; its table cell says so, and
    # there is nothing to do about it (the adaptive plan measures the dynamic server at every
    # level placed for the set, each static pair only at its own).
    out["efficiency"] = relative.by_level
    out["efficiency_interpolated"] = relative.interpolated
    out["efficiency_min"] = relative.minimum
    out["efficiency_interval"] = schedule_mod.ratio_interval(
        run, prompt_set, requests, relative.closest, relative.by_level, DYNAMIC)
    out["efficiency_short"] = _short_levels(run, prompt_set, relative)
    out["claim"] = text.one_server_claim(prompt_set, out)
    out["sentence"] = f"{out['claim']}; {text.advice(text.threshold(out), levels[-1])}"
    return out


def _short_levels(run: Run, prompt_set: str, relative: Relative) -> dict[str, ShortLevel]:
    """The levels where the dynamic server falls under E_TARGET: its E, the switches its log
    shows in the window, the curve it fell short of (eagle3: it should have kept drafting;
    zero-step: it should have stopped; None where the static curves are interpolated) and
    whether they were."""
    switches = mean_by_level(run.summary, DYNAMIC, prompt_set, "server_switches")
    return {c: {"efficiency": e, "switches": int(switches.get(int(c), 0)),
                "short_of": relative.closest.get(int(c)),
                "interpolated": int(c) in relative.interpolated}
            for c, e in relative.by_level.items() if e < E_TARGET}


def _plain_server(run: Run, prompt_set: str, plain: PromptSetAnalysis,
                  base: dict[int, float]) -> PlainServer:
    """The plain-server decision: c*, the zero-step tax, and how much faster a plain server is."""
    zero = mean_by_level(run.summary, "zero-step", prompt_set, "output_tok_s")
    speculative = [mean_by_level(run.summary, name, prompt_set, "output_tok_s")
                   for name in {"eagle3", *schedule_mod.k_curves(run, prompt_set).values()}]
    if plain["outcome"] == "crossover":
        c_star = text.crossing(plain)[0]
        above = [c for c in plain["levels"] if c > c_star]
    else:
        above = plain["levels"] if plain["outcome"] == "eagle3_never_wins" else []
    out: PlainServer = {
        "outcome": plain.get("outcome"),
        "crossover_concurrency": plain.get("crossover_concurrency"),
        "interval": plain.get("interval"),
        "sampling_interval": plain.get("sampling_interval"),
        "threshold_batch_size": plain.get("threshold_batch_size"),
    }
    out["tax"] = tax(zero, base)
    out["faster_above"] = plain_advantage(base, speculative, above)
    out["claim"] = plain["claim"]
    out["sentence"] = f"{plain['claim']}; {text.plain_consequence(out)}"
    return out


def analyze_prompt_set(
    run: Run, prompt_set: str, *, seed: int, resamples: int, inflation: float = 1.0,
    requests: PairedRequests | None = None, between: BetweenLaunch | None = None,
) -> PromptSetAnalysis:
    """Both decisions, efficiencies, tax and schedule for one prompt set (analysis.json keys);
    `between` is analysis.json's between_launch section, when a second launch measured it."""
    requests = requests if requests is not None else PairedRequests(run)
    stats = _static(run, prompt_set, inflation)
    base, spec, zero = stats[PLAIN.den], stats[PLAIN.num], stats[ONE_SERVER.den]
    if not base:
        return _one_server_only(run, prompt_set, spec, zero, seed=seed, resamples=resamples,
                                requests=requests, between=between)
    notes: list[str] = []
    levels = shared_levels(PLAIN, prompt_set, spec, base, str(run.path), notes)
    out: PromptSetAnalysis = {**decide(
        run.summary, prompt_set, PLAIN, (spec, base), levels, seed=seed, resamples=resamples,
        requests=requests, grid=grid_of(run),
        launch_sd=ratio_sd(between, prompt_set, PLAIN.num, PLAIN.den))}
    out["notes"] = notes + out["notes"]
    # The envelope against both plain curves, as before the zero-step curve existed.
    dynamic = mean_by_level(run.summary, DYNAMIC, prompt_set, "output_tok_s")
    envelope = relative_to_best(dynamic, {PLAIN.den: means(base), PLAIN.num: means(spec)},
                                paired=requests.versus(DYNAMIC, prompt_set))
    out["envelope_efficiency"] = envelope.by_level
    out["envelope_interpolated"] = envelope.interpolated
    out["envelope_min"] = envelope.minimum
    out["claim"] = text.plain_claim(prompt_set, out)
    out["one_server"] = _one_server(run, prompt_set, spec, zero, seed=seed,
                                    resamples=resamples, requests=requests, between=between)
    out["plain_server"] = _plain_server(run, prompt_set, out, means(base))
    out["schedule"] = schedule_mod.schedule(run, prompt_set, requests)
    out["prompt_tokens"] = context.prompt_tokens(run, prompt_set)
    out["sentence"] = text.set_sentence(out)
    return out


def _one_server_only(
    run: Run, prompt_set: str, spec: dict[int, LevelStats], zero: dict[int, LevelStats], *,
    seed: int, resamples: int, requests: PairedRequests, between: BetweenLaunch | None,
) -> PromptSetAnalysis:
    """A set measured without a baseline: the one-server decision, and a plain-server decision
    that says it was not measured (the keys every reader expects, with no outcome)."""
    one = _one_server(run, prompt_set, spec, zero, seed=seed, resamples=resamples,
                      requests=requests, between=between)
    out: PromptSetAnalysis = {
        "outcome": None, "crossover_concurrency": None, "interval": None,
        "threshold_batch_size": None, "levels": one["levels"], "notes": [NO_BASELINE],
        "claim": one["claim"],
        "envelope_efficiency": {}, "envelope_interpolated": [], "envelope_min": None,
        "one_server": one,
        "plain_server": {"outcome": None, "crossover_concurrency": None, "interval": None,
                         "threshold_batch_size": None, "tax": {}, "faster_above": {},
                         "claim": NO_BASELINE, "sentence": NO_BASELINE},
        "schedule": schedule_mod.schedule(run, prompt_set, requests),
        "prompt_tokens": context.prompt_tokens(run, prompt_set),
    }
    out["sentence"] = text.set_sentence(out)
    return out
