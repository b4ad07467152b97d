"""Reading the two runs of a comparison and checking that they can be compared.

Both runs are read only through :func:`specbench.results.load_run`, and only their manifests
and summaries: a committed reference may keep only ``manifest.json`` and ``summary.parquet``,
so nothing here needs per-request rows. Runs measured with other settings (engine, model,
protocol, prompts, ...) are refused with every difference listed, because a reference made
with other values says nothing about the candidate. The reference's second launch, where there
is one, must be measured like the reference itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd

from specbench import configurations
from specbench.config import to_dict
from specbench.configurations import DECISION_PAIRS
from specbench.errors import ConfigError, UserError
from specbench.regress.thresholds import GOODPUT, LATENCY_COLUMN
from specbench.results import Run, load_run
from specbench.results.analysis import PromptSetAnalysis
from specbench.results.points import level_text, rate_text
from specbench.stats import finite_or_none

CI_LOW_COLUMN = "output_tok_s_ci_low"
CI_HIGH_COLUMN = "output_tok_s_ci_high"


class RegressInputError(UserError, ValueError):
    """The two runs cannot be compared; the message says exactly what does not match."""


@dataclass(frozen=True)
class Samples:
    """One point of one run, repeats pooled."""

    output_tok_s: tuple[float, ...]
    ci_low: tuple[float, ...] | None  # None when any repeat lacks its interval
    ci_high: tuple[float, ...] | None
    accept_length: tuple[float, ...]  # NaN repeats dropped
    n_requests: int
    n_errors: int
    flags: frozenset[str]
    # Latency percentiles and goodput by summary column, per repeat; a column is here only
    # when every repeat has a positive value. `metric_se`: the columns' `<name>_se`, likewise.
    metrics: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    metric_se: Mapping[str, tuple[float, ...]] = field(default_factory=dict)


def _metric_columns(rows: pd.DataFrame) -> tuple[dict[str, tuple[float, ...]],
                                                 dict[str, tuple[float, ...]]]:
    """The point's latency percentile and goodput columns with a value in every repeat."""
    values: dict[str, tuple[float, ...]] = {}
    ses: dict[str, tuple[float, ...]] = {}
    for column in rows.columns:
        if not (LATENCY_COLUMN.match(str(column)) or column == GOODPUT):
            continue
        found = [finite_or_none(v) for v in rows[column]]
        if all(v is not None and v > 0 for v in found):
            values[str(column)] = tuple(float(v) for v in found if v is not None)
        se_column = f"{column}_se"
        if se_column in rows.columns:
            se = [finite_or_none(v) for v in rows[se_column]]
            if all(v is not None and v >= 0 for v in se):
                ses[str(column)] = tuple(float(v) for v in se if v is not None)
    return values, ses


# (mode, prompt set, level): the concurrency (an int), or an open-loop run's request rate.
Key = tuple[str, str, float]


def samples(summary: pd.DataFrame) -> dict[Key, Samples]:
    """Each measured point of a summary, repeats pooled."""
    out: dict[Key, Samples] = {}
    if summary.empty:
        return out
    has_ci = CI_LOW_COLUMN in summary.columns and CI_HIGH_COLUMN in summary.columns
    # Parquet and CSV round trips may turn the level into a float; the key is an int. An
    # open-loop run's level is its request rate (a float).
    frame = summary.assign(concurrency=pd.to_numeric(summary["concurrency"]).astype(int))
    open_loop = "request_rate" in frame and frame["request_rate"].notna().any()
    level_column = "request_rate" if open_loop else "concurrency"
    for (mode, prompt_set, conc), rows in frame.groupby(
        ["mode", "prompt_set", level_column], sort=True
    ):
        tok = tuple(finite_or_none(v) for v in rows["output_tok_s"])
        ci_low: tuple[float, ...] | None = None
        ci_high: tuple[float, ...] | None = None
        if has_ci:
            lows = [finite_or_none(v) for v in rows[CI_LOW_COLUMN]]
            highs = [finite_or_none(v) for v in rows[CI_HIGH_COLUMN]]
            if all(v is not None and v > 0 for v in lows) and all(v is not None for v in highs):
                ci_low = tuple(float(v) for v in lows if v is not None)
                ci_high = tuple(float(v) for v in highs if v is not None)
        accept = tuple(
            v for v in (finite_or_none(a) for a in rows["accept_length"]) if v is not None
        )
        flags = frozenset(
            f for text in rows["flags"].astype(str) for f in text.split(";") if f.strip()
        )
        value = float(cast(float, conc)) if open_loop else int(cast(int, conc))
        metrics, metric_se = _metric_columns(rows)
        out[(str(mode), str(prompt_set), value)] = Samples(
            # A point that produced no number (every request failed) measured nothing: 0 tok/s.
            output_tok_s=tuple(0.0 if v is None else v for v in tok),
            ci_low=ci_low,
            ci_high=ci_high,
            accept_length=accept,
            n_requests=int(pd.to_numeric(rows["n_requests"], errors="coerce").fillna(0).sum()),
            n_errors=int(pd.to_numeric(rows["n_errors"], errors="coerce").fillna(0).sum()),
            flags=flags,
            metrics=metrics,
            metric_se=metric_se,
        )
    return out


def describe_points(keys: Iterable[Key]) -> str:
    """'eagle3/coding c=64,128; baseline/agentic c=250' (open loop: '2,8 req/s')."""
    by_group: dict[tuple[str, str], list[float]] = {}
    for mode, prompt_set, conc in sorted(keys):
        by_group.setdefault((mode, prompt_set), []).append(conc)
    return "; ".join(
        f"{mode}/{pset} " + (f"c={','.join(str(c) for c in levels)}"
                             if isinstance(levels[0], int)
                             else f"{','.join(rate_text(c) for c in levels)} req/s")
        for (mode, pset), levels in by_group.items()
    )


# (path in the manifest config, label). These change what is measured, so a reference made
# with other values says nothing about the candidate.
_CONFIG_FIELDS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("engine",), "engine"),
    (("server", "model_path"), "model path"),
    (("server", "draft_model_path"), "draft model path"),
    (("server", "speculative_num_steps"), "speculative steps"),
    (("server", "tp_size"), "tensor parallel size"),
    (("load", "protocol"), "protocol"),
    (("load", "temperature"), "temperature"),
    (("load", "extra_request_body"), "extra request body"),
    (("load", "ignore_eos"), "ignore-eos"),
)
_SIM_PROFILE_FIELD: tuple[tuple[str, ...], str] = (("sim", "profile"), "sim profile")


def _dig(obj: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def _config_problems(
    reference: Run, candidate: Run, allowed: Sequence[str] = (), notes: list[str] | None = None,
    other: str = "candidate",
) -> list[str]:
    ref_cfg = to_dict(reference.manifest.config)
    cand_cfg = to_dict(candidate.manifest.config)
    problems = []
    fields = list(_CONFIG_FIELDS)
    if "sim" in (_dig(ref_cfg, ("engine",)), _dig(cand_cfg, ("engine",))):
        fields.append(_SIM_PROFILE_FIELD)
    for path, label in fields:
        ref_value, cand_value = _dig(ref_cfg, path), _dig(cand_cfg, path)
        if ref_value == cand_value:
            continue
        dotted = ".".join(path)
        text = f"{label} differs ({dotted}: reference {ref_value!r}, {other} {cand_value!r})"
        if dotted in allowed:
            if notes is not None:
                notes.append(f"{text}; compared anyway (--allow-config-change {dotted})")
            continue
        # A second launch must match its reference: no option lets it differ.
        hint = "" if other != "candidate" else (
            f" (if intended, pass --allow-config-change {dotted})")
        problems.append(text + hint)
    return problems


def allowed_config_fields() -> tuple[str, ...]:
    """Dotted manifest paths that `--allow-config-change` accepts."""
    return tuple(".".join(path) for path, _ in (*_CONFIG_FIELDS, _SIM_PROFILE_FIELD))


def threshold_only_levels(run: Run, keys: Iterable[Key]) -> set[Key]:
    """Points at the T-1, T, T+1 levels a sweep adds outside the configured grid.

    The sweep adds them for the dynamic mode and, where a run has one, for the two static
    servers it is compared with there. At the dynamic server the running batch straddles the
    switch, so whether a step drafts depends on request timing and the throughput does not
    repeat between identical runs (measured: up to 50% apart); with an auto threshold the
    levels themselves move. They are reported in the run, not gated.
    """
    if run.open_loop:  # a point per rate, the same for every configuration
        return set()
    levels = set(run.manifest.config.concurrency)
    switching = any(_straddles(name) for name in run.manifest.config.modes)
    return {k for k in keys if k[2] not in levels and (
        _straddles(k[0]) or (switching and k[0] in DECISION_PAIRS["T"]))}


def _straddles(name: str) -> bool:
    """Whether a configuration's sweep adds levels around its threshold."""
    try:
        config = configurations.parse(name)
    except ConfigError:
        return False
    return config.adaptive == "threshold" and config.threshold != 1


def _sha256(run: Run, name: str) -> str | None:
    record = run.manifest.prompt_sets.get(name)
    return record.sha256 if record is not None else None


def _prompt_set_problems(
    reference: Run, candidate: Run, ref_sets: set[str], cand_sets: set[str], notes: list[str]
) -> list[str]:
    problems = []
    missing_sets = sorted(ref_sets - cand_sets)
    if missing_sets:
        problems.append(
            f"the candidate has no prompt set {', '.join(missing_sets)} "
            f"(reference has {', '.join(sorted(ref_sets))})"
        )
    unverified = []
    for name in sorted(ref_sets & cand_sets):
        ref_hash = _sha256(reference, name)
        cand_hash = _sha256(candidate, name)
        if ref_hash is None and cand_hash is None:
            unverified.append(name)
        elif ref_hash is None or cand_hash is None:
            side = "reference" if ref_hash is None else "candidate"
            problems.append(
                f"prompt set {name!r} has no sha256 in the {side} manifest, so it cannot be "
                "shown to be the same prompts"
            )
        elif ref_hash != cand_hash:
            problems.append(
                f"prompt set {name!r} differs (sha256 {str(ref_hash)[:12]} in the reference, "
                f"{str(cand_hash)[:12]} in the candidate)"
            )
    if unverified:
        notes.append(
            f"prompt set(s) {', '.join(unverified)} carry no sha256 in either manifest; "
            "assumed identical"
        )
    return problems


def analysis_entry(run: Run, prompt_set: str) -> PromptSetAnalysis | None:
    """One prompt set's entry of the run's analysis.json, when it has an outcome."""
    sets = (run.analysis or {}).get("prompt_sets")
    entry = sets.get(prompt_set) if isinstance(sets, dict) else None
    if isinstance(entry, dict) and "outcome" in entry:
        return entry
    return None


@dataclass(frozen=True)
class Comparable:
    """Two runs checked against each other: the points to judge and what to tell the user."""

    ref: dict[Key, Samples]
    cand: dict[Key, Samples]
    keys: list[Key]  # points in both runs that the gate judges, sorted
    prompt_sets: list[str]  # the reference's prompt sets, sorted
    notes: list[str]
    # The reference's second launch (same settings, fresh servers), where there is one: what
    # the latency and goodput limits are widened by.
    relaunch: dict[Key, Samples] | None = None
    relaunch_run: Run | None = None


def _raise_problems(reference: Run, candidate: Run, ref: dict[Key, Samples],
                    cand: dict[Key, Samples], allowed: Sequence[str],
                    notes: list[str]) -> set[Key]:
    """Raise RegressInputError with every mismatch; return the ungated threshold-only points."""
    problems = _config_problems(reference, candidate, allowed, notes)
    ref_sets = {s for _, s, _ in ref}
    cand_sets = {s for _, s, _ in cand}
    problems += _prompt_set_problems(reference, candidate, ref_sets, cand_sets, notes)
    missing = sorted(k for k in ref if k not in cand and k[1] in cand_sets)
    optional = threshold_only_levels(reference, ref)
    if optional:
        notes.append(f"{len(optional)} point(s) at levels the sweep added around the "
                     f"threshold, not gated (the dynamic server switches there, so they do not "
                     f"repeat run to run, and an auto threshold moves them): "
                     f"{describe_points(optional)}")
        missing = [k for k in missing if k not in optional]
    if missing:
        problems.append(f"{len(missing)} reference point(s) missing in the candidate: "
                        f"{describe_points(missing)}")
    if problems:
        raise RegressInputError(
            "cannot compare: " + "; ".join(problems)
            + "; rerun the candidate with the reference's settings or make a new reference"
        )
    return optional


RELAUNCH_DIR = "relaunch"  # a reference's second launch, stored inside it


def relaunch_of(reference_dir: str | Path, given: str | Path | None = None) -> Path | None:
    """The reference's second launch: `given`, else ``<reference>/relaunch`` when it holds a run
    (`specbench reference update RUN2 --name NAME/relaunch`), else None."""
    if given is not None:
        return Path(given)
    nested = Path(reference_dir) / RELAUNCH_DIR
    return nested if (nested / "manifest.json").is_file() else None


def load_relaunch(reference: Run, relaunch_dir: str | Path) -> Run:
    """The second launch, once it is shown to be measured like the reference."""
    second = load_run(relaunch_dir)
    problems = _config_problems(reference, second, other="second launch")
    for name in sorted(set(reference.prompt_sets) & set(second.prompt_sets)):
        if _sha256(reference, name) != _sha256(second, name):
            problems.append(f"prompt set {name!r} differs")
    if second.open_loop != reference.open_loop:
        problems.append("one is open-loop, the other closed-loop")
    if problems:
        raise RegressInputError(
            f"the reference's second launch {second.path} was not measured like the reference: "
            + "; ".join(problems)
            + "; sweep both launches with the same settings (scripts/gpu_regression.py reference)")
    return second


def comparable(
    reference: Run, candidate: Run, allow_config_changes: Sequence[str] = (),
    relaunch_dir: str | Path | None = None,
) -> Comparable:
    """Check that two runs can be compared (raise RegressInputError if not); the points to judge.

    `allow_config_changes`: dotted manifest paths (e.g. ``sim.profile``) whose difference is
    intended, as when a planted slow profile is passed by path; they are noted, not refused.
    `relaunch_dir`: the reference's second launch (:func:`relaunch_of`), or None.
    """
    unknown = sorted(set(allow_config_changes) - set(allowed_config_fields()))
    if unknown:
        raise ConfigError(f"--allow-config-change {', '.join(unknown)} is not a compared "
                          f"setting; choose from {', '.join(allowed_config_fields())}")
    if reference.open_loop != candidate.open_loop:
        kinds = {True: "open-loop (--request-rates)", False: "closed-loop (--concurrency)"}
        raise RegressInputError(
            f"the reference is {kinds[reference.open_loop]} and the candidate "
            f"{kinds[candidate.open_loop]}: they measure different things; compare runs of one "
            "kind")
    ref = samples(reference.summary)
    cand = samples(candidate.summary)
    if not ref:
        raise RegressInputError(
            f"the reference run {reference.path} has no measured points "
            "(a committed reference needs summary.parquet or points/); make a new reference"
        )
    notes: list[str] = []
    optional = _raise_problems(reference, candidate, ref, cand, allow_config_changes, notes)
    extra = sorted(k for k in cand if k not in ref)
    if extra:
        notes.append(f"{len(extra)} candidate point(s) not in the reference, ignored: "
                     f"{describe_points(extra)}")
    skipped = sorted(k for k in ref if float(np.median(ref[k].output_tok_s)) <= 0)
    if skipped:
        notes.append(f"reference point(s) with no throughput, skipped: {describe_points(skipped)}")
    keys = [k for k in sorted(ref) if k not in skipped and k in cand and k not in optional]
    if not keys:
        raise RegressInputError(
            f"the reference run {reference.path} has no point with a positive output tok/s; "
            "make a new reference"
        )
    flagged = [
        f"{k[0]}/{k[1]} {level_text(k[2])} ({side}: {','.join(sorted(s.flags))})"
        for k in keys for side, s in (("reference", ref[k]), ("candidate", cand[k])) if s.flags
    ]
    if flagged:
        notes.append("flagged points (their numbers may not reflect the server): "
                     + "; ".join(flagged))
    second = None if relaunch_dir is None else load_relaunch(reference, relaunch_dir)
    if second is not None:
        notes.append(f"limits from two launches of the reference ({reference.path} and "
                     f"{second.path})")
    return Comparable(ref, cand, keys, sorted({s for _, s, _ in ref}), notes,
                      None if second is None else samples(second.summary), second)
