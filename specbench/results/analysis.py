"""analysis.json's shape: the typed model every writer fills and every reader reads.

The classes are TypedDicts, so the analysis stays the plain dict that is written as JSON (the
file is the same bytes it was); they say which keys there are and what each holds. Keys a
writer leaves out in some cases (an outcome without a crossover, a run without a baseline,
an open-loop run) are not required. Levels and rates are string keys ("8", "0.5"), as JSON
has them. Readers open the file through :func:`load_analysis`, which checks it against the
model and keeps keys the model does not name (a newer writer's), and writers go through
:func:`write_analysis_file`.

The analysis lives here, with the run directory, because the run loader reads it; the code
that computes it (specbench.analysis) sits above the loader.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import NotRequired, cast

from pydantic import ConfigDict, TypeAdapter, ValidationError, with_config
from typing_extensions import TypedDict  # pydantic reads typing.TypedDict only from 3.12

from specbench.results.manifest import RunDirError
from specbench.results.store import write_json

# Unknown keys are kept: a file written by a later version still loads, whole.
_KEEP_EXTRA = ConfigDict(extra="allow")

Interval = list[float]  # [low, high]


@with_config(_KEEP_EXTRA)
class Bootstrap(TypedDict):
    resamples: int
    seed: int
    confidence: float


@with_config(_KEEP_EXTRA)
class Intervals(TypedDict):
    """How the run's errors were made, and the factor on batch-means errors."""

    per_point: str
    ratio: str
    slices: int
    slice_lag1_mean: float | None
    inflation: float
    pair_blocks: int


@with_config(_KEEP_EXTRA)
class LaunchChange(TypedDict):
    """One configuration measured on two launches: the change per level and sigma."""

    levels: list[int]
    change_pct: list[float]
    sd_pct: float


@with_config(_KEEP_EXTRA)
class BetweenLaunch(TypedDict):
    relaunch: str
    by_configuration: dict[str, LaunchChange]  # keyed "mode/prompt_set"


@with_config(_KEEP_EXTRA)
class PromptTokens(TypedDict):
    p50: int
    p90: int
    min: int
    max: int
    n_requests: int


@with_config(_KEEP_EXTRA)
class BucketBounds(TypedDict):
    """A context bucket: its name, token bounds and range text."""

    bucket: str
    low_tokens: int
    high_tokens: int
    range: str


@with_config(_KEEP_EXTRA)
class ShortLevel(TypedDict):
    """A level where the dynamic server falls under the efficiency target."""

    efficiency: float
    switches: int
    short_of: str | None  # the static curve it fell short of; None where interpolated
    interpolated: NotRequired[bool]  # older files lack it


@with_config(_KEEP_EXTRA)
class Decision(TypedDict, total=False):
    """One crossing of EAGLE-3 with another configuration (crossover.decide), and what the
    prompt set's analysis adds to it. Without a crossover the interval keys are None or
    absent; without the other curve only the first four keys and the notes are there."""

    outcome: str | None
    crossover_concurrency: float | None
    interval: Interval | None
    threshold_batch_size: int | None
    confirmed: bool | None
    sampling_interval: Interval | None
    chord_error_log2: float | None
    crossover_batch_size: float
    threshold_interval: list[int]
    outcome_support: float
    interval_method: list[str]
    levels: list[int]
    ratio_by_concurrency: dict[str, float]
    ratio_interval_by_concurrency: dict[str, Interval]
    batch_size_by_concurrency: dict[str, float]
    notes: list[str]
    claim: str
    sentence: str


@with_config(_KEEP_EXTRA)
class OneServer(Decision, total=False):
    """The one-server decision (EAGLE-3 against its zero-step path) and the dynamic server's
    efficiency against the better of the two."""

    efficiency: dict[str, float]
    efficiency_interpolated: list[int]
    efficiency_min: float | None
    efficiency_interval: dict[str, Interval]
    efficiency_short: dict[str, ShortLevel]


@with_config(_KEEP_EXTRA)
class PlainServer(TypedDict, total=False):
    """The plain-server decision: c*, the zero-step tax and how much faster a plain server is."""

    outcome: str | None
    crossover_concurrency: float | None
    interval: Interval | None
    sampling_interval: Interval | None
    threshold_batch_size: int | None
    tax: dict[str, float]
    faster_above: dict[str, float]
    claim: str
    sentence: str


@with_config(_KEEP_EXTRA)
class Schedule(TypedDict, total=False):
    """The tuned schedule: the best K per level as batch-size slots, and how the tuned server
    compares with the static curves and with SGLang's default schedule."""

    slots: dict[str, int]
    per_level: dict[str, int]
    measured_best: dict[str, int]
    candidates: dict[str, str]  # K -> the configuration measured with it
    levels: list[int]
    batch_size_by_concurrency: dict[str, float]
    applied_slots: dict[str, int] | None
    steps_by_accept: dict[str, dict[str, int]]
    efficiency: dict[str, float]
    efficiency_interval: dict[str, Interval]
    efficiency_interpolated: list[int]
    efficiency_min: float | None
    vs_sglang_default: dict[str, float]
    vs_sglang_default_interval: dict[str, Interval]
    vs_sglang_default_geomean: float | None


@with_config(_KEEP_EXTRA)
class RateDecision(TypedDict, total=False):
    """An open-loop run's crossing on one metric (tok_s or goodput), by request rate."""

    metric: str
    outcome: str
    rates: list[str]
    ratio: list[float]
    ratio_se_log: list[float]
    outcome_support: float
    interval_method: list[str]
    left_out: list[str]
    rate_req_s: float
    interval: Interval
    bracket: list[str]
    tie_below: bool
    baseline_batch_size: float | None
    threshold_batch_size: int | None


@with_config(_KEEP_EXTRA)
class DynamicRate(TypedDict):
    """A switching server's efficiency at one request rate of an open-loop run."""

    rate: str
    efficiency_tok_s: float | None
    efficiency_goodput: float | None
    switches: float | None
    threshold: int | None
    above_threshold_share: float | None


# One open-loop point: the rate and the summary's columns (numbers, flags text, None for NaN).
RatePoint = dict[str, float | int | str | None]


@with_config(_KEEP_EXTRA)
class PromptSetAnalysis(Decision, total=False):
    """One prompt set. Closed loop: the plain-server decision at the top level (as its keys
    always were), the envelope, both decisions, the schedule. Open loop: the rate decisions
    and points (``tok_s`` ... ``dynamic``)."""

    envelope_efficiency: dict[str, float]
    envelope_interpolated: list[int]
    envelope_min: float | None
    one_server: OneServer
    plain_server: PlainServer
    schedule: Schedule | None
    prompt_tokens: PromptTokens | None
    applied_threshold: int | None
    context_bucket: BucketBounds | None
    loss_at_mix_threshold: dict[str, float]
    points: dict[str, list[RatePoint]]
    tok_s: RateDecision | None
    goodput: RateDecision | None
    threshold_source: str | None
    dynamic: dict[str, list[DynamicRate]]


@with_config(_KEEP_EXTRA)
class Mix(TypedDict):
    """The mixed deployment: T_mix and each other set's loss per level there."""

    threshold_batch_size: int
    loss_by_set: dict[str, dict[str, float]]
    max_loss_by_set: dict[str, float]


@with_config(_KEEP_EXTRA)
class SurfaceDecision(TypedDict):
    outcome: str | None
    crossover_concurrency: float | None
    interval: Interval | None
    threshold_batch_size: int | None


@with_config(_KEEP_EXTRA)
class SurfaceBucket(TypedDict):
    bucket: str
    low_tokens: int
    high_tokens: int
    range: str
    prompt_tokens: PromptTokens | None
    one_server: SurfaceDecision
    plain_server: SurfaceDecision
    tax: dict[str, float] | None
    efficiency_min: float | None


@with_config(_KEEP_EXTRA)
class ContextSurface(TypedDict):
    """A base set's context buckets side by side, and the two ratio grids (bucket x level)."""

    levels: list[int]
    buckets: list[SurfaceBucket]
    over_zero_step: list[list[float | None]]
    over_baseline: list[list[float | None]]


@with_config(_KEEP_EXTRA)
class Analysis(TypedDict, total=False):
    """The whole file. Closed loop: the recommendation, the mix and the context surface;
    open loop: the load it was measured under (``load`` ... ``slo``)."""

    analysis_version: int
    finding: str
    recommended_threshold: int | None
    recommendation_source: str | None
    combine_rule: str
    applied_threshold: int | None
    bootstrap: Bootstrap
    intervals: Intervals
    mix: Mix | None
    prompt_sets: dict[str, PromptSetAnalysis]
    context_surface: dict[str, ContextSurface] | None
    between_launch: BetweenLaunch
    load: str
    request_rates: list[str]
    burstiness: float
    max_concurrency: int | None
    slo: dict[str, float]


@cache
def _adapter() -> TypeAdapter[Analysis]:
    return TypeAdapter(Analysis)


def check_analysis(found: object) -> Analysis:
    """`found` checked against the model (pydantic's ValidationError says where it is not);
    returned as it is, so what is read is what was written, key for key and number for
    number (the model's float fields would turn a JSON 3 into 3.0)."""
    _adapter().validate_python(found)
    return cast(Analysis, found)


def load_analysis(path: Path) -> Analysis:
    """Read analysis.json at `path` through the model; RunDirError (one line) where the file
    does not fit it."""
    try:
        return check_analysis(json.loads(path.read_text()))
    except json.JSONDecodeError as exc:
        raise RunDirError(
            f"{path} is not JSON ({exc.msg} at line {exc.lineno}); remove it and run "
            "`specbench threshold` on the run to write it anew") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise RunDirError(
            f"{path} does not fit analysis.json's model ({where}: {first['msg']}); remove it "
            "and run `specbench threshold` on the run to write it anew") from None


def write_analysis_file(path: Path, analysis: Analysis) -> Path:
    """Write `analysis` to `path` (atomically, as every file), checked against the model."""
    return write_json(path, check_analysis(analysis))
