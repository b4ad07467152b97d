"""The analysis in words: claims, advice, the finding and `specbench threshold`'s text."""

from __future__ import annotations

import json
from collections.abc import Mapping

from specbench.analysis.context import phrase
from specbench.analysis.mix import MIX_SET, chosen_threshold
from specbench.configurations import Schedule
from specbench.engines.argv import adaptive_config  # the adaptive JSON's format, printed here
from specbench.results.analysis import (
    Analysis,
    Decision,
    Mix,
    PlainServer,
    PromptSetAnalysis,
    RateDecision,
    SurfaceDecision,
)


def c_words(value: float) -> str:
    """A concurrency for a sentence: whole from 9.5 up, else one decimal without a trailing 0."""
    return f"{value:.0f}" if value >= 9.5 else f"{value:.1f}".rstrip("0").rstrip(".")


def interval_words(lo: float, hi: float) -> str:
    """A 95% interval of concurrency for a sentence; one decimal where whole numbers would show
    a narrow interval as one number ("27–27")."""
    if c_words(lo) != c_words(hi):
        return f"{c_words(lo)}–{c_words(hi)}"
    digits = 1 if f"{lo:.1f}" != f"{hi:.1f}" else 2
    return f"{lo:.{digits}f}–{hi:.{digits}f}"


def crossing(d: Decision | PlainServer | SurfaceDecision) -> tuple[float, float, float]:
    """c* and its 95% interval (low, high) of a decision whose outcome is a crossover: only
    then are they set."""
    c_star, interval = d["crossover_concurrency"], d["interval"]
    if c_star is None or interval is None:
        raise TypeError("a crossover without its c* or interval")
    lo, hi = interval
    return c_star, lo, hi


def threshold(d: Decision) -> int:
    """The threshold of a decided outcome (None only where the decision could not be made)."""
    value = d["threshold_batch_size"]
    if value is None:
        raise TypeError("an undecided decision has no threshold")
    return value


def _grid(levels: list[int]) -> str:
    return f"{levels[0]}–{levels[-1]}" if len(levels) > 1 else f"{levels[0]}"


def plain_claim(prompt_set: str, out: Decision) -> str:
    """What EAGLE-3 vs the baseline shows for one prompt set, without the advice."""
    levels = out["levels"]
    outcome = out["outcome"]
    if outcome == "crossover":
        c_star, lo, hi = crossing(out)
        return (f"EAGLE-3 wins below {c_words(c_star)} concurrent requests "
                f"({prompt_set}; 95% interval {interval_words(lo, hi)})")
    if outcome == "eagle3_never_wins":
        return (f"EAGLE-3 never wins ({prompt_set}): the baseline is faster at every measured "
                f"level ({_grid(levels)} concurrent requests)")
    return (f"EAGLE-3 wins at every measured level ({prompt_set}; {_grid(levels)} concurrent "
            "requests), no crossover in range")


def one_server_claim(prompt_set: str, out: Decision) -> str:
    """What EAGLE-3 vs its zero-step path shows for one prompt set."""
    outcome = out["outcome"]
    if outcome == "crossover":
        c_star, lo, hi = crossing(out)
        return (f"EAGLE-3 beats its zero-step path below {c_words(c_star)} "
                f"concurrent requests ({prompt_set}; 95% interval {interval_words(lo, hi)})")
    if outcome == "eagle3_never_wins":
        return (f"the zero-step path is as fast as EAGLE-3 or faster at every measured level "
                f"({prompt_set}; {_grid(out['levels'])} concurrent requests)")
    return (f"EAGLE-3 beats its zero-step path at every measured level ({prompt_set}; "
            f"{_grid(out['levels'])} concurrent requests)")


def advice(threshold: int, top_level: int) -> str:
    """What to do with a threshold, in words."""
    if threshold <= 1:
        return "never draft (threshold 1)"
    if threshold > top_level:
        return f"keep drafting at every measured batch size (threshold {threshold})"
    return f"stop drafting at batch size {threshold}"


def _pct_range(values: list[float]) -> str:
    lo, hi = min(values) * 100, max(values) * 100
    return f"{lo:.0f}%" if round(lo) == round(hi) else f"{lo:.0f}–{hi:.0f}%"


def plain_consequence(plain: PlainServer) -> str:
    """"above c*, a separate plain server is x% faster", from the measured levels."""
    faster = list(plain.get("faster_above", {}).values())
    outcome = plain["outcome"]
    if outcome == "eagle3_always_wins":
        return "a separate plain server does not pay off in the measured range"
    by = f" {_pct_range(faster)}" if faster else ""
    if outcome == "eagle3_never_wins":
        return (f"a separate plain server is{by} faster than any speculative configuration "
                "measured, at every level")
    return (f"above it a separate plain server is{by} faster than any speculative "
            "configuration measured")


def set_sentence(entry: PromptSetAnalysis) -> str:
    """One prompt set's answer: the one-server advice, then the plain-server decision, then
    the prompt lengths they were measured with (the context they hold for)."""
    measured_with = phrase(entry.get("prompt_tokens"))
    tail = f" (measured with {measured_with})" if measured_with else ""
    one = entry.get("one_server") or {}
    if one.get("outcome") is None:
        return (f"{entry['claim']}; {advice(threshold(entry), entry['levels'][-1])}"
                + tail)
    plain = entry["plain_server"]
    if plain["outcome"] == "eagle3_never_wins":
        # A plain server is the answer; say what one adaptive server should do all the same.
        return (f"Plain server: {plain['sentence']}; serve without speculative decoding. If one "
                f"adaptive server must serve it anyway: {one['sentence']}{tail}")
    return f"One server: {one['sentence']}. Plain server: {plain['sentence']}{tail}"


def _interval(d: Decision) -> str:
    _, lo, hi = crossing(d)
    return f"95% interval {interval_words(lo, hi)}"


def one_server_finding(prompt_set: str, entry: PromptSetAnalysis) -> str:
    """The one-server decision (T) of a set in one short sentence, with its numbers."""
    one = entry.get("one_server") or {}
    outcome = one.get("outcome")
    if outcome is None:  # no zero-step curve: T from where EAGLE-3 meets the baseline
        chosen = chosen_threshold(entry)
        return (f"{prompt_set}: {advice(chosen, entry['levels'][-1])}, from c* (no zero-step curve "
                "was measured).")
    t = one["threshold_batch_size"]
    if outcome == "crossover":
        return (f"{prompt_set}: stop drafting at batch size T = {t} (EAGLE-3 falls behind its "
                f"zero-step path at {c_words(crossing(one)[0])} concurrent "
                f"requests, {_interval(one)}).{holds_words(entry)}")
    if outcome == "eagle3_never_wins":
        return (f"{prompt_set}: never draft, T = 1 (the zero-step path is as fast as EAGLE-3 "
                f"at every level measured, {_grid(one['levels'])}).{holds_words(entry)}")
    return (f"{prompt_set}: keep drafting, T = {t} (EAGLE-3 still beats its zero-step path at "
            f"{one['levels'][-1]}, the largest level measured).{holds_words(entry)}")


def holds_words(entry: PromptSetAnalysis) -> str:
    """One sentence where the measured dynamic server falls under the 0.97 it should hold:
    how much, where, and why in the words its points give; empty where it holds."""
    short = (entry.get("one_server") or {}).get("efficiency_short") or {}
    if not short:
        return ""
    applied = entry.get("applied_threshold")
    worst_c, worst = min(short.items(), key=lambda item: item[1]["efficiency"])
    levels = ", ".join(
        f"{c} ({d['efficiency']:.3f}{', interpolated' if d.get('interpolated') else ''})"
        for c, d in short.items())
    ratios = (entry.get("one_server") or {}).get("ratio_by_concurrency") or {}
    ratio = ratios.get(str(worst_c))
    why = (_short_why(int(worst_c), applied, worst["short_of"], ratio)
           if not worst.get("interpolated")
           else "the static curves are interpolated, so the shortfall may be theirs "
                "(measure them at that level: --straddle-rounds)")
    flips = (f", switching {worst['switches']} times in its window as its batch crossed T"
             if worst["switches"] else "")
    at = f" at T = {applied}" if applied is not None else ""
    lost = 1 - worst["efficiency"]
    return (f" The dynamic server{at} falls under E = 0.97 at c = {levels}: {lost:.1%} under "
            f"the better static curve at c = {worst_c}, where {why}{flips}.")


def _short_why(level: int, applied: int | None, short_of: str | None,
               eagle3_over_zero: float | None) -> str:
    """Why a dynamic server fell short at `level`, from which side of its threshold the level
    lies on (closed-loop users keep about c requests running), which curve it lost to and which
    static curve was faster there (EAGLE-3 / zero-step, None where not measured)."""
    if applied == 1:  # zero-step is the adaptive server at T = 1: the same launch arguments
        return ("it ran the zero-step server's own configuration (T = 1), so the shortfall is "
                "what a second launch of one configuration moves, not its threshold")
    drafting = applied is None or level < applied
    eagle3_faster = None if eagle3_over_zero is None else eagle3_over_zero >= 1.0
    if short_of == "eagle3" and not drafting and eagle3_faster is not False:
        return ("it ran its zero-step path where EAGLE-3 was faster (the threshold is too low "
                "for this load)")
    if short_of != "eagle3" and drafting and eagle3_faster is not True:
        return ("it kept drafting where its zero-step path was faster (the threshold is too "
                "high for this load)")
    mode = "drafting" if drafting else "at zero steps"
    return (f"it ran {mode} as the static server does, but slower: the adaptive runtime's "
            "own cost, or steps run in the other state")


def plain_finding(prompt_set: str, entry: PromptSetAnalysis) -> str | None:
    """The plain-server decision (c*) of a set in one short sentence; None without a baseline."""
    outcome = entry.get("outcome")
    plain = entry.get("plain_server") or {}
    faster = list(plain.get("faster_above", {}).values())
    by = f" {_pct_range(faster)}" if faster else ""
    if outcome == "crossover":
        return (f"{prompt_set}: above c* = {c_words(crossing(entry)[0])} concurrent "
                f"requests ({_interval(entry)}) a separate plain server is{by} faster than "
                "speculative decoding.")
    if outcome == "eagle3_never_wins":
        return (f"{prompt_set}: a plain server is{by} faster than speculative decoding at every "
                f"level measured ({_grid(entry['levels'])}): serve without it.")
    if outcome == "eagle3_always_wins":
        return (f"{prompt_set}: EAGLE-3 beats a plain server at every level measured, up to "
                f"{entry['levels'][-1]} concurrent requests.")
    return None


def finding(sets: Mapping[str, PromptSetAnalysis], recommended: int | None,
            source: str | None, mix: Mix | None) -> str:
    """The run's finding: one short sentence per decision (each set's T, then its c*), then the
    mixed-deployment recommendation (which is the mix set's T: said once). The why (claims,
    prompt lengths) is each set's `sentence`, which the report gives in the set's own
    section."""
    mixed = source == "mix" and recommended is not None
    parts = [sentence for name, s in sets.items()
             for sentence in (None if mixed and name == MIX_SET
                              else one_server_finding(name, s), plain_finding(name, s))
             if sentence]
    if mixed and recommended is not None:
        top = sets[MIX_SET]["levels"][-1]
        losses = mix.get("max_loss_by_set", {}) if mix else {}
        cost = ", ".join(f"{name} up to {loss:.1%}" for name, loss in losses.items())
        parts.append(f"Mixed deployment (measured mix): {advice(recommended, top)}"
                     + (f"; throughput lost there against each set's better static curve: "
                        f"{cost}." if cost else "."))
    elif source is None:
        parts.append(_no_mix(sets))
    return " ".join(parts)


def _no_mix(sets: Mapping[str, PromptSetAnalysis]) -> str:
    """The finding's last sentence for several sets and no measured mix."""
    if any(s.get("context_bucket") for s in sets.values()):
        return ("SGLang switches by batch size only: deploy the threshold of the context bucket "
                "your traffic's prompts fall in.")
    names = [n for n in sets if n != MIX_SET]
    weights = ",".join(f"{n}={1 / len(names):.2g}" for n in names)
    return f"One threshold for all sets needs a measured mix (--mix {weights})."


def per_set_thresholds(sets: Mapping[str, PromptSetAnalysis]) -> str:
    def one(name: str, s: PromptSetAnalysis) -> str:
        measured_with = phrase(s.get("prompt_tokens"))
        return f"{name} {chosen_threshold(s)}" + (f" ({measured_with})" if measured_with else "")

    shown = ", ".join(one(name, s) for name, s in sets.items())
    if any(s.get("context_bucket") for s in sets.values()):
        return (f"Per-set thresholds (batch size), per context bucket: {shown}; SGLang switches "
                "by batch size only, so deploy the threshold of the bucket your traffic's "
                "prompts fall in (specbench threshold --prompt-set SET@BUCKET)")
    names = [n for n in sets if n != MIX_SET]
    weights = ",".join(f"{n}={1 / len(names):.2g}" for n in names)
    return (f"Per-set thresholds (batch size): {shown}; a mixed-deployment threshold needs a "
            f"measured mix (--mix {weights})")


def _decision_lines(name: str, s: PromptSetAnalysis) -> list[str]:
    lines = [f"{name}: {s['sentence']}"]
    for label, d in (("one server", s.get("one_server") or {}), ("plain server", s)):
        if d.get("outcome") != "crossover":
            continue
        _, lo, hi = crossing(d)
        lines.append(
            f"  {label}: c* = {d['crossover_concurrency']:.1f} (95% interval {lo:.1f}–{hi:.1f}), "
            f"mean server batch size there {d['crossover_batch_size']:.1f}; threshold "
            f"{d['threshold_batch_size']} (interval {d['threshold_interval'][0]}–"
            f"{d['threshold_interval'][1]}), bootstrap support {d['outcome_support']:.0%}"
        )
    held = holds_words(s)
    if held:
        lines.append(f"  dynamic server:{held}")
    notes = [*s["notes"], *((s.get("one_server") or {}).get("notes") or [])]
    lines.extend(f"  note: {note}" for note in notes)
    slots = (s.get("schedule") or {}).get("slots")
    if slots:
        schedule = Schedule(tuple((int(k), int(v)) for k, v in slots.items()))
        lines.append(f"  tuned schedule (batch size: steps) {slots}; adaptive JSON "
                     + json.dumps(schedule.to_json()))
    return lines


def threshold_summary_text(result: Analysis, k: int) -> str:
    """Plain text for `specbench threshold RUN_DIR`: per set c*, interval, T, then the advice."""
    if result.get("load") == "open":  # an open-loop run: its decisions per rate
        return "\n".join(
            f"{name}: " + "; ".join(
                [rate_decision_words(s[m]) for m in ("goodput", "tok_s") if s.get(m)]
                + ([f"threshold {s['threshold_batch_size']} (from the {s['threshold_source']} "
                    "decision)"] if s.get("threshold_batch_size") is not None else []))
            for name, s in result["prompt_sets"].items())
    lines = [line for name, s in result["prompt_sets"].items()
             for line in _decision_lines(name, s)]
    t = result["recommended_threshold"]
    if t is None:
        lines.append(per_set_thresholds(result["prompt_sets"]))
        return "\n".join(lines)
    source = result.get("recommendation_source")
    lines.append(f"recommended threshold: {t}" + (" (the measured mix)" if source == "mix" else ""))
    if t <= 1:
        lines.append("SGLang: run without speculative decoding, or draft zero steps at every "
                     "batch size:")
    else:
        lines.append(f"SGLang: draft {k} steps below batch size {t}, none from {t} on:")
    lines.append("  --speculative-adaptive --speculative-adaptive-config FILE  with FILE = "
                 + json.dumps(adaptive_config(k, t)))
    return "\n".join(lines)


# -- open loop ------------------------------------------------------------------------------

def rate_decision_words(d: RateDecision | None) -> str:
    """One decision of an open-loop run: where EAGLE-3 stops winning, in requests/s."""
    if d is None:
        return "not decided (needs baseline and eagle3 at a finite rate)"
    metric = "goodput" if d["metric"] == "goodput" else "output tok/s"
    if d["outcome"] == "eagle3_never_wins":
        return f"on {metric} EAGLE-3 is behind at every rate from {d['rates'][0]} req/s"
    if d["outcome"] == "eagle3_always_wins":
        return f"on {metric} EAGLE-3 is still ahead at {d['rates'][-1]} req/s, the top rate"
    lo, hi = d["interval"]
    batch = d.get("baseline_batch_size")
    where = f" (baseline batch {batch:.0f})" if batch is not None else ""
    if d.get("tie_below"):
        low, high = d["bracket"]
        ratio = d["ratio"][d["rates"].index(high)]
        return (f"on {metric} EAGLE-3 keeps up with the baseline up to {low} req/s{where} and "
                f"is behind at {high} req/s ({ratio:.2f}x)")
    return (f"on {metric} EAGLE-3 stops winning at {d['rate_req_s']:.3g} req/s "
            f"[{lo:.3g}-{hi:.3g}]{where}")


def arrivals_finding(found: Analysis) -> str:
    """The finding of an open-loop run: per set both decisions, then the dynamic server."""
    parts = []
    for name, s in found["prompt_sets"].items():
        said = [rate_decision_words(s["tok_s"])]
        if s.get("goodput") is not None:
            said.insert(0, rate_decision_words(s["goodput"]))
        for mode, rows in (s.get("dynamic") or {}).items():
            e_good = [r["efficiency_goodput"] for r in rows if r["efficiency_goodput"] is not None]
            e_tok = [r["efficiency_tok_s"] for r in rows if r["efficiency_tok_s"] is not None]
            if e_good:
                said.append(f"{mode} E on goodput {_pct_range(e_good)}")
            elif e_tok:
                said.append(f"{mode} E on tok/s {_pct_range(e_tok)}")
        parts.append(f"{name}: " + "; ".join(said) + ".")
    return " ".join(parts)
