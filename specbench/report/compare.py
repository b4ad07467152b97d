"""Run against run, for people: `specbench compare RUN_A RUN_B [...]`.

The first run is the base. Per prompt set and server configuration that every run measured,
each level's output tok/s in every run and each other run's ratio over the base; per prompt set
each run's decisions (one-server threshold, both crossovers, their 95% intervals) from its
analysis; acceptance length per level. Above the tables: what differs between the manifests
(engine version, profile, model, commit), and the warnings and left-out parts.

Per-level values are :func:`specbench.analysis.point_means` (repeats averaged), as in each
run's report.md and figures; decisions are each run's own analysis
(:func:`specbench.analysis.current_analysis`; nothing is written into the runs).

Only a comparison that would mean nothing is refused (:class:`CompareError`): no prompt set,
configuration or concurrency level in common. What only some runs measured is left out and
listed; a prompt set whose content (sha256) differs is compared with a warning. Different
engines, profiles or models are what comparing is for and are never refused.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from specbench.analysis import current_analysis, point_means
from specbench.analysis.curves import level
from specbench.analysis.mix import chosen_threshold
from specbench.errors import UserError
from specbench.report.style import label as mode_label
from specbench.report.style import order
from specbench.results import Run, load_run
from specbench.results.analysis import Analysis
from specbench.results.analysis import Decision as DecisionEntry
from specbench.results.points import rate_text
from specbench.stats import finite_or_none, geomean

Item = TypeVar("Item")


class CompareError(UserError, ValueError):
    """Runs whose comparison would mean nothing; the message says why and what to pass."""


@dataclass(frozen=True)
class Level:
    """One concurrency level of one (prompt set, configuration), one value per run; in
    open-loop runs a request rate (inf: a burst)."""

    concurrency: float
    output_tok_s: tuple[float | None, ...]  # base first
    accept_length: tuple[float | None, ...]
    flags: tuple[tuple[str, ...], ...]

    @property
    def ratios(self) -> tuple[float | None, ...]:
        """Each other run's tok/s over the base's (None where either is missing or 0)."""
        base = self.output_tok_s[0]
        return tuple(None if v is None or not base else v / base for v in self.output_tok_s[1:])


@dataclass(frozen=True)
class Group:
    """One configuration on one prompt set, at the levels every run measured."""

    prompt_set: str
    mode: str
    levels: tuple[Level, ...]

    def geomean_ratio(self, other: int) -> float | None:
        """Geometric mean over levels of run `other`'s ratio (1 = the first non-base run)."""
        return geomean_or_none([lv.ratios[other - 1] for lv in self.levels])


@dataclass(frozen=True)
class Decision:
    """One crossover decision of one run and prompt set, as its analysis states it."""

    outcome: str | None
    crossover_concurrency: float | None
    interval: tuple[float, float] | None
    threshold_batch_size: int | None
    threshold_interval: tuple[int, int] | None

    @classmethod
    def of(cls, entry: DecisionEntry | None) -> Decision:
        entry = entry or {}
        interval, t_interval = entry.get("interval"), entry.get("threshold_interval")
        return cls(entry.get("outcome"), finite_or_none(entry.get("crossover_concurrency")),
                   (interval[0], interval[1]) if interval else None,
                   entry.get("threshold_batch_size"),
                   (t_interval[0], t_interval[1]) if t_interval else None)


@dataclass(frozen=True)
class RunDecisions:
    # The one-server T the report gives: vs zero-step when measured, else vs the baseline.
    threshold_batch_size: int | None
    one_server: Decision
    plain_server: Decision


@dataclass(frozen=True)
class Comparison:
    labels: tuple[str, ...]  # A, B, ...: base first
    names: tuple[str, ...]  # run directory names
    paths: tuple[str, ...]
    facts: dict[str, tuple[str, ...]]  # manifest fact -> value per run
    warnings: tuple[str, ...]
    left_out: tuple[str, ...]
    groups: tuple[Group, ...]
    decisions: dict[str, tuple[RunDecisions | None, ...]]  # prompt set -> per run

    @property
    def prompt_sets(self) -> list[str]:
        return list(dict.fromkeys(g.prompt_set for g in self.groups))

    def differing(self) -> dict[str, tuple[str, ...]]:
        return {k: v for k, v in self.facts.items() if len(set(v)) > 1}

    def ratio_span(self, other: int) -> tuple[float, float, float, int] | None:
        """(geomean, lowest, highest, n) of run `other`'s ratios over every compared point."""
        values = [r for g in self.groups for lv in g.levels
                  if (r := lv.ratios[other - 1]) is not None]
        return (geomean(values), min(values), max(values), len(values)) if values else None


def geomean_or_none(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return geomean(present) if present else None


# ---------------------------------------------------------------------------------------------
# building the comparison


def manifest_facts(run: Run) -> dict[str, str]:
    """What a reader needs to know a run by, as text ("–" where not recorded)."""
    m, cfg = run.manifest, run.manifest.config
    gpus, commit = m.fingerprint.get("gpus") or [], str(m.fingerprint.get("git_commit") or "")
    facts = {
        "engine": cfg.engine, "engine version": m.engine.version,
        "sim profile": cfg.sim.profile if cfg.engine == "sim" else None,
        "model": cfg.server.model_path, "draft model": cfg.server.draft_model_path,
        "speculative steps": cfg.server.speculative_num_steps,
        "GPU": ", ".join(f"{n} x {name}" for name, n in sorted(
            Counter(str(g.get("name")) for g in gpus).items())) or None,
        "GPU driver": ", ".join(sorted({str(g.get("driver_version")) for g in gpus})) or None,
        # 12 hex digits name a commit; "-dirty" says the tree had changes.
        "git commit": (commit[:12] + commit[40:]) or None,
        "specbench": m.specbench_version, "protocol": cfg.load.protocol,
        "window (s)": cfg.load.window_s, "repeats": cfg.load.repeats, "started": m.started_at,
        "load": "open loop" if cfg.load.request_rates else "closed loop",
    }
    return {k: "–" if v is None else f"{v:g}" if isinstance(v, float) else str(v)
            for k, v in facts.items()}


def _split(labels: Sequence[str], per_run: Sequence[Collection[Item]],
           ordered: Iterable[Item]) -> tuple[list[Item], dict[str, list[Item]]]:
    """(what every run has, in `ordered`'s order; the rest by the runs that lack it)."""
    items = list(dict.fromkeys(ordered))
    common = [v for v in items if all(v in vs for vs in per_run)]
    lacking: dict[str, list[Item]] = {}
    for v in items:
        if v not in common:
            who = ", ".join(lb for lb, vs in zip(labels, per_run, strict=True) if v not in vs)
            lacking.setdefault(who, []).append(v)
    return common, lacking


def _common(labels: Sequence[str], what: str,
            per_run: Sequence[list[str]]) -> tuple[list[str], list[str]]:
    """(names every run has, base's order first; left-out lines); refuses when none is."""
    common, lacking = _split(labels, per_run, [v for vs in per_run for v in vs])
    if not common:
        has = "; ".join(f"{lb} has {', '.join(vs) or 'none'}"
                        for lb, vs in zip(labels, per_run, strict=True))
        raise CompareError(f"no {what} in common ({has}); compare runs that measured at least "
                           f"one {what} alike")
    return common, [f"{what} {', '.join(vs)}: not in {who}" for who, vs in lacking.items()]


def _hash_warnings(runs: Sequence[Run], labels: Sequence[str], sets: list[str]) -> list[str]:
    out = []
    for name in sets:
        records = [r.manifest.prompt_sets.get(name) for r in runs]
        hashes = [rec.sha256 if rec else None for rec in records]
        if len({h for h in hashes if h}) > 1:
            shown = ", ".join(f"{h[:12]}… in {lb}" for lb, h in zip(labels, hashes, strict=True)
                              if h)
            out.append(f"prompt set {name} has other content in some runs (sha256 {shown}): "
                       "its ratios compare different prompts")
    return out


def _level_of(run: Run, row: Any) -> float:
    """A point's level: its concurrency, or an open-loop run's request rate."""
    return float(row.request_rate) if run.open_loop else level(row.concurrency)


def _point_flags(run: Run, mode: str, prompt_set: str) -> dict[float, tuple[str, ...]]:
    rows = run.summary[(run.summary["mode"] == mode) & (run.summary["prompt_set"] == prompt_set)]
    out: dict[float, set[str]] = {}
    for row in rows.itertuples():
        out.setdefault(_level_of(run, row), set()).update(
            f.strip() for f in str(row.flags).split(";") if f.strip())
    return {c: tuple(sorted(names)) for c, names in out.items()}


Curves = dict[tuple[str, str], dict[float, tuple[float | None, float | None]]]


def _curves(run: Run) -> Curves:
    """(mode, prompt set) -> level -> (output tok/s, accept length), repeats averaged."""
    out: Curves = {}
    for row in point_means(run).itertuples():
        key = (str(row.mode), str(row.prompt_set))
        out.setdefault(key, {})[_level_of(run, row)] = (
            finite_or_none(row.output_tok_s), finite_or_none(row.accept_length))
    return out


def _group(runs: Sequence[Run], labels: Sequence[str], curves: Sequence[Curves],
           key: tuple[str, str]) -> tuple[Group | None, list[str]]:
    """One configuration on one prompt set at its common levels; left-out lines."""
    mode, prompt_set = key
    per_run = [c[key] for c in curves]
    common, lacking = _split(labels, per_run, sorted(c for curve in per_run for c in curve))
    notes = [f"{mode}/{prompt_set} c={','.join(map(str, cs))}: not in {who}"
             for who, cs in lacking.items()]
    if not common:
        return None, [*notes, f"{mode}/{prompt_set}: no concurrency level in common"]
    flags = [_point_flags(r, mode, prompt_set) for r in runs]
    levels = tuple(Level(c, tuple(curve[c][0] for curve in per_run),
                         tuple(curve[c][1] for curve in per_run),
                         tuple(f.get(c, ()) for f in flags)) for c in common)
    return Group(prompt_set, mode, levels), notes


def _decisions(analysis: Analysis | None, prompt_set: str) -> RunDecisions | None:
    entry = ((analysis or {}).get("prompt_sets") or {}).get(prompt_set)
    if not entry:
        return None
    return RunDecisions(chosen_threshold(entry), Decision.of(entry.get("one_server")),
                        Decision.of(entry))


def compare_runs(runs: Sequence[Run]) -> Comparison:
    """Compare loaded runs (the first is the base); CompareError when it would mean nothing."""
    if len(runs) < 2:
        raise CompareError("compare needs at least two run directories; pass RUN_A RUN_B")
    for run in runs:
        if run.summary.empty:
            raise CompareError(f"{run.path} has no measured points; run `specbench sweep` first")
    if len({r.open_loop for r in runs}) > 1:
        raise CompareError("these runs mix closed-loop users (--concurrency) and open-loop "
                           "arrivals (--request-rates), which measure different things; compare "
                           "runs of one kind")
    # A, B, C, ...: short enough for table headers; the header maps them to run names.
    labels = tuple(chr(ord("A") + i) if i < 26 else f"R{i + 1}" for i in range(len(runs)))
    sets, left_out = _common(labels, "prompt set", [r.prompt_sets for r in runs])
    steps = runs[0].manifest.config.server.speculative_num_steps
    modes, left_modes = _common(labels, "configuration", [order(r.modes, steps) for r in runs])
    curves = [_curves(r) for r in runs]
    keys, lacking = _split(labels, curves, [(m, s) for s in sets for m in modes])
    left_out += left_modes + [f"{'; '.join(f'{m}/{s}' for m, s in ks)}: not in {who}"
                              for who, ks in lacking.items()]
    groups: list[Group] = []
    for key in keys:
        group, notes = _group(runs, labels, curves, key)
        left_out += notes
        groups += [group] if group else []
    if not groups:
        raise CompareError("no concurrency level in common (" + "; ".join(left_out)
                           + "); compare runs with at least one common level (--concurrency)")
    compared = list(dict.fromkeys(g.prompt_set for g in groups))
    facts = [manifest_facts(r) for r in runs]
    # Computed once per run: a stale analysis.json means a bootstrap (seconds) per call.
    # An open-loop run's decisions are per rate, in its own report.
    analyses = [None if r.open_loop else current_analysis(r) for r in runs]
    return Comparison(
        labels=labels, names=tuple(r.path.name for r in runs),
        paths=tuple(str(r.path) for r in runs),
        facts={k: tuple(f[k] for f in facts) for k in facts[0]},
        warnings=tuple(_hash_warnings(runs, labels, compared)), left_out=tuple(left_out),
        groups=tuple(groups),
        decisions={s: tuple(_decisions(a, s) for a in analyses) for s in compared})


def compare_dirs(run_dirs: Sequence[Path | str]) -> Comparison:
    """Load each run directory with the one loader and compare them."""
    return compare_runs([load_run(d) for d in run_dirs])


# ---------------------------------------------------------------------------------------------
# Markdown


def _fmt(value: float | None, spec: str) -> str:
    return "–" if value is None else format(value, spec)


def _change(value: float | None) -> str:
    """A ratio and the change it means: "0.909 (-9.1%)"."""
    return "–" if value is None else f"{value:.3f} ({value - 1:+.1%})"


_LEFT = ("run", "", "name", "path", "flags")


def _md_table(headers: list[str], rows: list[list[str]], left: Sequence[str] = _LEFT) -> str:
    lines = ["| " + " | ".join(headers) + " |",
             "|" + "|".join("---" if h in left else "---:" for h in headers) + "|"]
    return "\n".join(lines + ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |"
                              for row in rows])


def _header_section(c: Comparison) -> list[str]:
    """Which run is which, then what differs between their manifests, then what does not."""
    differing = c.differing()
    rows = [["name", *(f"`{n}`" for n in c.names)], ["path", *(f"`{p}`" for p in c.paths)]]
    rows += [[k, *(f"`{v}`" for v in vs)] for k, vs in differing.items()]
    heads = ["", f"{c.labels[0]} (base)", *c.labels[1:]]
    same = [f"{k} `{vs[0]}`" for k, vs in c.facts.items() if k not in differing and vs[0] != "–"]
    tail = [f"Same in every run: {'; '.join(same)}.", ""] if same else []
    return [_md_table(heads, rows, left=heads), "", *tail]


def _summary_lines(c: Comparison) -> list[str]:
    out = []
    for i, name in enumerate(c.labels[1:], start=1):
        if (span := c.ratio_span(i)) is None:
            continue
        mean, low, high, n = span
        out += [f"**{name} vs {c.labels[0]}:** output tok/s ×{mean:.3f} ({mean - 1:+.1%}), "
                f"geometric mean over {n} points; per point {low - 1:+.1%} to {high - 1:+.1%}.",
                ""]
    return out


def _c_star(d: Decision) -> tuple[str, str]:
    """(c* cell, 95% interval cell) of one decision."""
    if d.outcome is None:
        return "–", "–"
    if d.outcome != "crossover" or d.crossover_concurrency is None or d.interval is None:
        return ("never wins" if d.outcome == "eagle3_never_wins" else "always wins"), "–"
    return f"{d.crossover_concurrency:.1f}", f"{d.interval[0]:.1f}–{d.interval[1]:.1f}"


def _decision_section(c: Comparison, prompt_set: str) -> list[str]:
    if c.facts.get("load", ("",))[0] == "open loop":
        return ["Open-loop runs: each run's report has its decisions per rate.", ""]
    if all(d is None for d in c.decisions[prompt_set]):
        return ["No decisions: these runs lack baseline or eagle3 points.", ""]
    rows = []
    for name, d in zip(c.labels, c.decisions[prompt_set], strict=True):
        if d is None:
            rows.append([name, "–", "–", "–", "–", "–", "–"])
            continue
        one = d.one_server.threshold_batch_size is not None
        span = (d.one_server if one else d.plain_server).threshold_interval
        # Without a zero-step curve T is the baseline crossover's: say so beside one that is not.
        rows.append([name, _fmt(d.threshold_batch_size, "d") + ("" if one else " (vs base)"),
                     f"{span[0]}–{span[1]}" if span else "–",
                     *_c_star(d.one_server), *_c_star(d.plain_server)])
    heads = ["run", "T", "T 95%", "c* vs 0-step", "95% interval", "c* vs base", "95% interval"]
    return [_md_table(heads, rows), ""]


def _flags_cell(labels: Sequence[str], flags: Sequence[tuple[str, ...]]) -> str:
    """"client_bound (A, B); too_few_requests (B)": each flag, then the runs that raised it."""
    by_flag: dict[str, list[str]] = {}
    for lb, fs in zip(labels, flags, strict=True):
        for f in fs:
            by_flag.setdefault(f, []).append(lb)
    return "; ".join(f"{f} ({', '.join(lbs)})" for f, lbs in sorted(by_flag.items()))


def _group_section(c: Comparison, g: Group) -> list[str]:
    base, others = c.labels[0], c.labels[1:]
    accept = any(v is not None for lv in g.levels for v in lv.accept_length)
    flagged = any(f for lv in g.levels for f in lv.flags)
    open_loop = c.facts.get("load", ("",))[0] == "open loop"
    heads = ["req/s" if open_loop else "c", *(f"{n} tok/s" for n in c.labels),
             *(f"{n} / {base}" for n in others)]
    heads += [f"{n} accept" for n in c.labels] if accept else []
    heads += ["flags"] if flagged else []
    rows = []
    for lv in g.levels:
        shown = rate_text(lv.concurrency) if open_loop else str(int(lv.concurrency))
        row = [shown, *(_fmt(v, ",.0f") for v in lv.output_tok_s),
               *(_change(r) for r in lv.ratios)]
        row += [_fmt(v, ".2f") for v in lv.accept_length] if accept else []
        rows.append(row + ([_flags_cell(c.labels, lv.flags)] if flagged else []))
    means = ", ".join(f"{n} / {base} ×{_fmt(g.geomean_ratio(i), '.3f')}"
                      for i, n in enumerate(others, start=1))
    return [f"### {mode_label(g.mode)}: {means} (geometric mean)", "", _md_table(heads, rows),
            ""]


def render_markdown(c: Comparison, figure: str | None = None) -> str:
    """compare.md: the runs and what differs, warnings, per prompt set decisions and tables."""
    title = " vs ".join(f"{lb} `{n}`" for lb, n in zip(c.labels, c.names, strict=True))
    out = [f"# specbench compare: {title}", "",
           f"{c.labels[0]} is the base: each ratio is a run's output tok/s over "
           f"{c.labels[0]}'s at the same concurrency (each run's mean over repeats).", ""]
    out += _header_section(c) + _summary_lines(c)
    out += [f"- warning: {w}" for w in c.warnings] + ([""] if c.warnings else [])
    if c.left_out:
        out += ["Left out (not measured by every run):", "",
                *(f"- {line}" for line in c.left_out), ""]
    for prompt_set in c.prompt_sets:
        out += [f"## {prompt_set}", "", *_decision_section(c, prompt_set)]
        for g in c.groups:
            out += _group_section(c, g) if g.prompt_set == prompt_set else []
    out += ["_T is the one-server threshold (batch size; \"vs base\": from the baseline "
            "crossover, no zero-step curve measured) with its 95% interval; c* is the "
            "crossover concurrency vs zero-step and vs the baseline; each from that run's own "
            "analysis. accept = tokens per verify step._", ""]
    if figure:
        out += [f"![Output tok/s of each run, and each run over {c.labels[0]}]({figure})", ""]
    return "\n".join(out)
