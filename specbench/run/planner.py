"""The plan of one sweep: which points each server measures, fed what was measured.

A sweep (:class:`~specbench.run.sweep.Sweep`) measures what the plan hands it and knows
nothing of why. The plan answers "which points next?" for every way of placing them: the
dense grid, the adaptive plan's bisection (:mod:`specbench.run.adaptive`), a dynamic server's
threshold and the levels around it (T-1, T, T+1) on the static servers it is compared with,
and a tuned server's schedule. The decisions it makes from an analysis (each set's threshold,
a tuned schedule, the adaptive plan's levels) are kept in the manifest, so that `--resume`
measures the same points; the caller saves it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from specbench import configurations
from specbench.config import DEFAULT_FIXED_THRESHOLD, SweepConfig
from specbench.configurations import Schedule, ServerConfiguration
from specbench.errors import UserError
from specbench.results import Manifest, PointKey, ThresholdRecord
from specbench.results.analysis import Analysis
from specbench.run import adaptive
from specbench.run.job import Job
from specbench.run.plan import compared_at_threshold, levels_for, straddled_thresholds

# The analysis of what is measured so far, computed only when a decision needs it.
Analyze = Callable[[], Analysis]


class PlanError(UserError, RuntimeError):
    """The plan cannot place the points a configuration needs; the message says what to add."""


class Plan:
    """Which points each configuration is measured at, as far as the measured ones decide."""

    def __init__(self, cfg: SweepConfig, prompt_sets: Iterable[str], manifest: Manifest) -> None:
        self.cfg = cfg
        self.prompt_sets = list(prompt_sets)
        self.manifest = manifest

    # -- what is known now ---------------------------------------------------------------

    def static(self) -> list[ServerConfiguration]:
        """The configurations measured before any analysis."""
        return [c for c in self.cfg.configurations if not self.cfg.waits_for_analysis(c)]

    def dependent(self) -> list[ServerConfiguration]:
        """The configurations whose schedule comes from the static curves."""
        return [c for c in self.cfg.configurations if self.cfg.waits_for_analysis(c)]

    def jobs(self, configs: Sequence[ServerConfiguration]) -> list[Job]:
        """The launches that measure `configs`, in order; a configuration still waiting for
        its decision (:meth:`decide`) is refused."""
        jobs = []
        for config in configs:
            groups = self._server_groups(config)
            for schedule, names in groups.items():
                label = "+".join(names) if len(groups) > 1 else None
                jobs.append(Job(config, schedule, names, self._keys(config, schedule, names),
                                label))
        return jobs

    def config_keys(self, config: ServerConfiguration) -> list[PointKey]:
        """Every point of a configuration whose schedules are known now."""
        return [key for job in self.jobs([config]) for key in job.keys]

    def planned(self) -> int:
        """Points planned now; a dynamic server's straddle levels count once its T is known."""
        total = 0
        load = self.cfg.load
        for config in self.cfg.configurations:
            known = self._known_schedules(config)
            for name in self.prompt_sets:
                levels = levels_for(config, self.cfg, known.get(name),
                                    self._refined(config, name), self._straddled(config, name))
                total += (len(load.request_rates) or len(levels)) * load.repeats
        return total

    def launches_left(self, configs: Sequence[ServerConfiguration], done: set[PointKey]) -> int:
        """Servers still to start for `configs`: one per schedule with points left; a dynamic
        server whose thresholds are not known yet counts one per prompt set."""
        launches = 0
        for config in configs:
            known = self._known_schedules(config)
            groups: dict[object, list[str]] = {}
            for name in self.prompt_sets:
                groups.setdefault(known.get(name, name), []).append(name)
            for group, names in groups.items():
                schedule = group if isinstance(group, Schedule) else None  # a name: unknown
                if any(k not in done for k in self._keys(config, schedule, names)):
                    launches += 1
        return launches

    # -- decisions fed by the analysis ---------------------------------------------------

    def decide(self, configs: Sequence[ServerConfiguration], analyze: Analyze) -> list[str]:
        """Each set's threshold or tuned schedule for the `configs` that wait for one, chosen
        once (from the analysis where nothing was given) and kept; returns what to say."""
        said: list[str] = []
        if any(c.needs_analysis and c.adaptive == "threshold" for c in configs):
            said += self.choose_thresholds(analyze)
        if any(c.needs_analysis and c.adaptive == "schedule" for c in configs):
            said += self._choose_schedules(analyze)
        return said

    def choose_thresholds(self, analyze: Analyze) -> list[str]:
        """The default dynamic server's threshold per prompt set, chosen once and kept.

        Given (`--threshold N`): N for every set. Auto: each set's own threshold from its
        measured crossover, so the dynamic check shows whether switching off at that set's
        threshold tracks the better static curve; the combined recommendation for a mixed
        deployment (the lowest over sets) is recorded beside them and reported.
        """
        names = self.prompt_sets
        stored = self.manifest.thresholds()
        if all(name in stored for name in names):
            return []
        cfg = self.cfg
        said: list[str] = []
        if cfg.threshold is not None:
            record = ThresholdRecord(value=cfg.threshold, source="given",
                                     per_prompt_set=dict.fromkeys(names, cfg.threshold))
        elif configurations.analyzable(cfg.modes):
            record, said = thresholds_from_crossovers(analyze(), names)
        else:
            fixed = DEFAULT_FIXED_THRESHOLD
            record = ThresholdRecord(value=fixed, source="default",
                                     per_prompt_set=dict.fromkeys(names, fixed))
            said = [f"[yellow]no eagle3 curve with a baseline or zero-step one to compute a "
                    f"threshold from; using {fixed}[/]"]
        self.manifest.threshold = record
        return said

    def threshold_moved(self, analyze: Analyze, measure_again: bool,
                        done: set[PointKey]) -> tuple[bool, list[str]]:
        """Choose the auto thresholds again with the points measured around them; True (and
        the new ones kept) where one moved: the chord between grid levels had misplaced it."""
        record = self.manifest.threshold
        if record is None or record.source != "auto" or not configurations.analyzable(
                self.cfg.modes):
            return False, []
        again, said = thresholds_from_crossovers(analyze(), self.prompt_sets)
        if again.per_prompt_set == record.per_prompt_set:
            return False, said
        if not measure_again and not self._straddles_measured(again, done):
            # T walked past the points measured: the dynamic server keeps the T they bracket.
            return False, [*said, "[yellow]note:[/] thresholds would move again with the "
                           "last points, beyond those measured; raise --straddle-rounds to "
                           "follow them"]
        moved = ", ".join(f"{n} {record.per_prompt_set.get(n)} -> {t}"
                          for n, t in again.per_prompt_set.items()
                          if t != record.per_prompt_set.get(n))
        then = "measuring around the new ones" if measure_again else "all measured already"
        self.manifest.threshold = again
        return True, [*said, f"thresholds moved with the points around them: {moved}; {then}"]

    def straddling(self) -> bool:
        """Whether static servers are measured around a dynamic server's threshold."""
        return bool(self.cfg.straddle_rounds) and any(
            c.adaptive == "threshold" for c in self.cfg.configurations)

    def chooses_thresholds(self) -> bool:
        """Whether a dynamic server's threshold comes from the measured curves."""
        return any(c.adaptive == "threshold" and c.needs_analysis
                   for c in self.cfg.configurations)

    def compared_at_threshold(self, static: Sequence[ServerConfiguration]
                              ) -> list[ServerConfiguration]:
        """The static servers a dynamic one is compared with at T-1, T, T+1."""
        return [c for c in static if compared_at_threshold(c)]

    # -- the adaptive plan ---------------------------------------------------------------

    def start_adaptive(self, static: Sequence[ServerConfiguration]) -> None:
        """The adaptive plan's first level, unless a round placed levels already (resume)."""
        adaptive.first_levels(self.manifest.refined, self.cfg.concurrency, self.prompt_sets,
                              [c.name for c in static])

    def place_next(self, found: Analysis, static: Sequence[ServerConfiguration]) -> list[str]:
        """One adaptive round: a level per decision not bracketed yet, kept in the manifest;
        what was placed, in words (empty: nothing left to place)."""
        return adaptive.place(found, self.manifest.refined, self.cfg.concurrency,
                              self.prompt_sets, [c.name for c in static])

    # -- lookups ----------------------------------------------------------------------------

    def _steps(self, config: ServerConfiguration) -> int:
        return config.num_steps(self.cfg.server.speculative_num_steps)

    def _known_schedules(self, config: ServerConfiguration) -> dict[str, Schedule | None]:
        """Each prompt set's schedule for `config` as far as it is known now."""
        given = config.threshold if config.threshold is not None else self.cfg.threshold
        if config.adaptive == "threshold" and given is not None:
            fixed = Schedule.from_threshold(self._steps(config), given)
            return dict.fromkeys(self.prompt_sets, fixed)
        if config.adaptive == "threshold":
            stored = self.manifest.thresholds()
            return {n: Schedule.from_threshold(self._steps(config), stored[n])
                    for n in self.prompt_sets if n in stored}
        if config.adaptive == "schedule":
            return {n: Schedule.from_slots(slots)
                    for n, slots in self.manifest.tuned.items() if n in self.prompt_sets}
        return dict.fromkeys(self.prompt_sets)

    def _server_groups(self, config: ServerConfiguration) -> dict[Schedule | None, list[str]]:
        """One server per distinct schedule: the default dynamic server of each prompt set runs
        with that set's own threshold (unless one was given), a tuned one with that set's own
        schedule, the others with one schedule or none."""
        known = self._known_schedules(config)
        missing = [n for n in self.prompt_sets if n not in known]
        if missing:
            raise PlanError(f"{config.name} has no schedule for {', '.join(missing)} yet: "
                            "its decision comes from the static curves")
        groups: dict[Schedule | None, list[str]] = {}
        for name in self.prompt_sets:
            groups.setdefault(known[name], []).append(name)
        return groups

    def _keys(self, config: ServerConfiguration, schedule: Schedule | None,
              names: list[str]) -> list[PointKey]:
        load = self.cfg.load
        if load.request_rates:  # open loop: a point per rate (load/arrivals.py)
            return [PointKey(config.name, name, load.max_concurrency or 0, r, rate)
                    for name in names for rate in load.request_rates
                    for r in range(load.repeats)]
        return [PointKey(config.name, name, c, r)
                for name in names
                for c in levels_for(config, self.cfg, schedule, self._refined(config, name),
                                    self._straddled(config, name))
                for r in range(load.repeats)]

    def _straddled(self, config: ServerConfiguration, name: str) -> list[int]:
        """The thresholds known now of the dynamic servers of set `name` that `config`, a
        static server they are compared with, is also measured around."""
        if not self.cfg.straddle_rounds:
            return []
        schedules = [self._known_schedules(c).get(name) for c in self.cfg.configurations
                     if c.adaptive == "threshold"]
        return straddled_thresholds(config, schedules)

    def _straddles_measured(self, record: ThresholdRecord, done: set[PointKey]) -> bool:
        """Whether the static servers compared at threshold have T-1, T and T+1 measured for
        each set's threshold in `record`."""
        for config in (c for c in self.cfg.configurations if compared_at_threshold(c)):
            for name, threshold in record.per_prompt_set.items():
                levels = levels_for(config, self.cfg, None, self._refined(config, name),
                                    [threshold])
                if any(PointKey(config.name, name, c, r) not in done for c in levels
                       for r in range(self.cfg.load.repeats)):
                    return False
        return True

    def _refined(self, config: ServerConfiguration, name: str) -> list[int]:
        """The adaptive plan's levels for one server and prompt set ([] in a dense run)."""
        if self.cfg.plan != "adaptive":
            return []
        return adaptive.placed_levels(self.manifest.refined, config.name, name)

    def _choose_schedules(self, analyze: Analyze) -> list[str]:
        """The tuned server's schedule per prompt set (the best K per level, as batch-size
        slots), chosen once from the measured static curves and kept in the manifest."""
        tuned = self.manifest.tuned
        if self.cfg.schedule and not tuned:  # the user's, measured as given
            tuned.update({name: dict(self.cfg.schedule) for name in self.prompt_sets})
        if all(name in tuned for name in self.prompt_sets):
            return []
        found = analyze()
        for name in self.prompt_sets:
            schedule = (found["prompt_sets"][name].get("schedule") or {}).get("slots")
            if not schedule:
                raise PlanError(
                    f"no tuned schedule for {name}: tuning needs the static EAGLE-3 curves at "
                    "several K and zero-step; run specbench tune (or add eagle3-k<K> and "
                    "zero-step to --modes)"
                )
            slots = {str(k): int(v) for k, v in schedule.items()}
            if not any(slots.values()):
                # All zero: SGLang still needs a K among the candidates (a slot no batch reaches).
                slots = {"0": self._steps(configurations.parse("tuned")), **slots}
            tuned[name] = slots
        shown = "; ".join(f"{n} {slots}" for n, slots in tuned.items())
        return [f"tuned schedules (batch size: steps): {shown}"]


def thresholds_from_crossovers(found: Analysis, names: Sequence[str]
                               ) -> tuple[ThresholdRecord, list[str]]:
    """Each set's one-server threshold: where EAGLE-3 meets the zero-step curve (what the
    dynamic server switches to). Without a zero-step curve, where it meets the baseline."""
    per_set: dict[str, int] = {}
    for name in names:
        entry = found["prompt_sets"][name]
        one_server = entry.get("one_server") or {}
        chosen = one_server.get("threshold_batch_size") or entry["threshold_batch_size"]
        # None: an open-loop run with no finite rate to decide at (--request-rates inf).
        per_set[name] = int(chosen) if chosen is not None else DEFAULT_FIXED_THRESHOLD
    recommended = found.get("recommended_threshold")
    shown = ", ".join(f"{n} {t}" for n, t in per_set.items())
    mixed = (f"recommended for a mixed deployment: {recommended}" if recommended is not None
             else "a mixed-deployment threshold needs a measured mix (--mix)")
    said = [f"thresholds from the measured crossovers (batch size): {shown}; {mixed}"]
    plain = [n for n in names if not (found["prompt_sets"][n].get("one_server") or {})
             .get("threshold_batch_size")]
    if plain:  # a real H200 run's dynamic server ran as a slow plain server above it
        said.append(
            f"[yellow]note:[/] {', '.join(plain)}: the threshold is the plain server's "
            "crossover (no zero-step curve); above it the dynamic server runs its zero-step "
            "path, slower than a plain server; add zero-step to --modes for the one-server "
            "threshold")
    value = int(recommended) if recommended is not None else None
    return ThresholdRecord(value=value, source="auto", per_prompt_set=per_set), said
