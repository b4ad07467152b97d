"""The mixed-deployment recommendation and what it costs each workload.

A server cannot tell workloads apart by batch size, so one threshold serves them all. The
threshold for a mixed deployment is measured, not derived: the ``mix`` prompt set (``--mix
coding=0.5,agentic=0.5``: requests of the named sets interleaved by weight) is analysed like any
set, and its one-server threshold T_mix is the recommendation. Without a measured mix there is
none (the report gives the per-set thresholds and says to measure a mix); a run of a single
prompt set recommends that set's threshold, since it measured the only workload.

With a mix, each other set's loss at T_mix comes from that set's own static curves: at each
level, the server drafts (EAGLE-3) when the set's batch size there is below T_mix and runs zero
steps from T_mix on; the loss is 1 - that / max(EAGLE-3, zero-step).
"""

from __future__ import annotations

from collections.abc import Mapping

from specbench.analysis.curves import batch_sizes, mean_by_level
from specbench.results import Run
from specbench.results.analysis import Mix, PromptSetAnalysis

MIX_SET = "mix"
RULE = ("the measured mix's one-server threshold (--mix); without a measured mix there is no "
        "mixed-deployment threshold, only the per-set ones")


def chosen_threshold(entry: PromptSetAnalysis) -> int:
    """A set's threshold for one server: vs zero-step when measured, else vs the baseline."""
    one = entry.get("one_server") or {}
    value = one.get("threshold_batch_size")
    if value is None:
        value = entry["threshold_batch_size"]
    if value is None:
        raise TypeError("neither decision of the set has a threshold")
    return int(value)


def recommendation(sets: Mapping[str, PromptSetAnalysis]) -> tuple[int | None, str | None]:
    """(recommended threshold, where it comes from: "mix" | "single prompt set" | None)."""
    if MIX_SET in sets:
        return chosen_threshold(sets[MIX_SET]), "mix"
    if len(sets) == 1:
        return chosen_threshold(next(iter(sets.values()))), "single prompt set"
    return None, None


def loss_at(run: Run, prompt_set: str, threshold: int) -> dict[str, float] | None:
    """1 - (EAGLE-3 below `threshold`, zero-step from it) / max of the two, per level."""
    summary = run.summary
    spec = mean_by_level(summary, "eagle3", prompt_set, "output_tok_s")
    zero = mean_by_level(summary, "zero-step", prompt_set, "output_tok_s")
    levels = sorted(c for c in set(spec) & set(zero) if max(spec[c], zero[c]) > 0)
    if not levels:
        return None
    batch, _ = batch_sizes(summary, prompt_set, levels, ("eagle3", "zero-step"))
    out = {}
    for c, b in zip(levels, batch, strict=True):
        served = spec[c] if b < threshold else zero[c]
        out[str(c)] = round(1.0 - served / max(spec[c], zero[c]), 4)
    return out


def mix_section(run: Run, sets: Mapping[str, PromptSetAnalysis]) -> Mix | None:
    """analysis.json's ``mix``: T_mix and each other set's loss per level there (None: no mix)."""
    if MIX_SET not in sets:
        return None
    threshold = chosen_threshold(sets[MIX_SET])
    losses = {name: loss for name in sets if name != MIX_SET
              if (loss := loss_at(run, name, threshold)) is not None}
    return {
        "threshold_batch_size": threshold,
        "loss_by_set": losses,
        "max_loss_by_set": {name: max(loss.values()) for name, loss in losses.items()},
    }
