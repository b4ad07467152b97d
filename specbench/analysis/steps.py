"""SGLang's decode log lines as per-step records, attributed to the points of a run.

SGLang (and the simulator, in the same words) logs a ``Decode batch`` line every
``--decode-log-interval`` decode forwards (40 unless given)::

    Decode batch, #running-req: B, #token: N, token usage: U, [accept len: A, accept rate: R, ]
    cuda graph: True, gen throughput (token/s): X, #queue-req: Q

``X`` is the tokens generated since the previous such line over the wall time since then, so
one decode step took ``B * A / X`` (A = 1 for a plain server) if nothing else ran in between.
A line is *steady* when the line before it in the same log was a decode line of the same batch:
no prefill forward, no finished or admitted request in the interval, so its time is decode
steps alone. At high load a 40-step interval nearly always holds a prefill; one-step lines
(``--decode-log-interval 1``) are steady at every load. Lines logged while SGLang's own profiler
runs (``Profiling starts`` to ``Profiling done``) and the first one after it are never steady:
its CPU tracing slows the host, and writing the trace stalls the scheduler (a real H100 log held
one such "step" of 1.45 s at batch 64).

specbench flushes the prefix cache before every attempt at a point (``Cache flushed
successfully!`` in the log), and the manifest keeps the points in the order they ran, so the
n-th flush of a configuration's logs opens its n-th attempt.
"""

from __future__ import annotations

import lzma
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from specbench.engines.argv import flag_value
from specbench.results import Manifest, PointKey

# SGLang 0.5.23 may put more fields between token usage and accept len (e.g. a hybrid
# model's pools) and after accept rate (cap len, cuda graph): skipped, as its own parser does.
DECODE_LINE = re.compile(
    r"Decode batch(?: \[\d+\])?, #running-req: (?P<batch>\d+), #token: (?P<kv>\d+), "
    r"token usage: [\d.]+, (?:(?!accept len: |gen throughput)[^\n])*"
    r"(?:accept len: (?P<accept>[\d.]+), )?.*?"
    r"gen throughput \(token/s\): (?P<tok_s>[\d.]+), #queue-req: (?P<queue>\d+)"
)
PREFILL_LINE = "Prefill batch"
FLUSH_LINE = "Cache flushed successfully!"
PROFILE_START_LINE = "Profiling starts"  # SGLang 0.5.17 and 0.5.23, with or without a stage
PROFILE_DONE_LINE = "Profiling done"
SGLANG_DECODE_LOG_INTERVAL = 40  # SGLang's default --decode-log-interval
_LEVEL = re.compile(r"^c(?P<c>\d+)-r(?P<r>\d+)$")


@dataclass(frozen=True)
class DecodeInterval:
    """One ``Decode batch`` line: the decode forwards since the line before it."""

    batch: int  # running requests at the line
    kv_tokens: int
    accept_length: float  # tokens per request per forward; 1 on a plain server
    gen_tok_s: float
    queued: int
    steady: bool  # the line before was a decode line of the same batch: decode steps only
    after_decode: bool  # the line before was a decode line (no idle gap between points)

    @property
    def step_ms(self) -> float:
        """Milliseconds per decode forward over the interval (prefills included if any ran)."""
        return 1e3 * self.batch * self.accept_length / self.gen_tok_s


def parse_decode_lines(lines: Iterable[str]) -> list[DecodeInterval]:
    """Every decode line of `lines` (one log, in order), each marked steady or not."""
    out: list[DecodeInterval] = []
    prev_batch: int | None = None  # the previous line's batch, if that line was a decode line
    profiling = False
    for line in lines:
        m = DECODE_LINE.search(line)
        if m is None:
            if PROFILE_START_LINE in line or PROFILE_DONE_LINE in line:
                profiling = PROFILE_START_LINE in line
                prev_batch = None
            elif PREFILL_LINE in line or FLUSH_LINE in line:
                prev_batch = None
            continue
        batch, tok_s = int(m["batch"]), float(m["tok_s"])
        if batch > 0 and tok_s > 0:
            out.append(DecodeInterval(
                batch=batch, kv_tokens=int(m["kv"]),
                accept_length=float(m["accept"]) if m["accept"] else 1.0,
                gen_tok_s=tok_s, queued=int(m["queue"]),
                steady=prev_batch == batch, after_decode=prev_batch is not None))
        prev_batch = None if profiling else batch
    return out


def decode_log_interval(argv: Sequence[str]) -> int:
    """The --decode-log-interval a server was launched with (SGLang's 40 if not given)."""
    value = flag_value([str(a) for a in argv], "--decode-log-interval")
    try:
        return max(1, int(value)) if value is not None else SGLANG_DECODE_LOG_INTERVAL
    except ValueError:
        return SGLANG_DECODE_LOG_INTERVAL


def read_log(path: Path) -> list[str]:
    """A server log's lines; committed runs keep theirs xz-compressed (``*.log.xz``)."""
    if path.suffix == ".xz":
        with lzma.open(path, "rt", errors="replace") as handle:
            return handle.read().splitlines()
    return path.read_text(errors="replace").splitlines()


def server_logs(servers_dir: Path, log_name: str) -> list[Path]:
    """A configuration's logs in launch order: a new launch moves the log it finds to the next
    free ``<name>.<n>.log`` (engines/process.py), so ``.1``, ``.2``, ... are older and the
    plain ``<name>.log`` is the newest; each may be xz-compressed."""
    stem = log_name.removesuffix(".log")
    found: dict[int, Path] = {}
    for path in servers_dir.glob(f"{stem}.*"):
        parts = path.name.removesuffix(".xz").split(".")
        if parts[0] != stem or parts[-1] != "log":
            continue
        if len(parts) == 2:
            found[1 << 30] = path
        elif len(parts) == 3 and parts[1].isdigit():
            found[int(parts[1])] = path
    return [found[n] for n in sorted(found)]


_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")


def _launch_segments(logs: list[list[str]]) -> list[list[list[str]]]:
    """Each launch's lines after each cache flush, launches in the order they ran: by the first
    timestamp a log holds (SGLang stamps its lines), else in the order the names give."""
    def started(lines: list[str]) -> str:
        return next((m[1] for line in lines if (m := _STAMP.match(line))), "")

    ordered = logs
    if all(started(lines) for lines in logs if any(FLUSH_LINE in x for x in lines)):
        ordered = sorted(logs, key=started)  # stable: logs without stamps keep their place
    launches: list[list[list[str]]] = []
    for lines in ordered:
        segments: list[list[str]] = []
        for line in lines:
            if FLUSH_LINE in line:
                segments.append([])
            elif segments:
                segments[-1].append(line)
        launches.append(segments)
    return launches


def _point_key(label: str) -> PointKey | None:
    """A closed-loop point's key from its manifest label (``eagle3/coding/c16-r0``)."""
    mode, _, rest = label.partition("/")
    prompt_set, _, level = rest.rpartition("/")
    m = _LEVEL.match(level)
    if not m or not prompt_set:
        return None
    return PointKey(mode, prompt_set, int(m["c"]), int(m["r"]))


def point_intervals(
    manifest: Manifest, run_dir: Path, config: str
) -> tuple[dict[PointKey, list[DecodeInterval]], str | None]:
    """The decode lines of each of `config`'s points (its last attempt), and why none could be
    attributed (None when they were)."""
    server = manifest.servers.get(config)
    if server is None or not server.log:
        return {}, f"the {config} server's log is not recorded in the manifest"
    logs = server_logs(run_dir / "servers", server.log)
    if not logs:
        return {}, f"{run_dir / 'servers' / server.log} is missing"
    per_launch = _launch_segments([read_log(path) for path in logs])
    segments = [segment for launch in per_launch for segment in launch]
    points = [(label, record) for label, record in manifest.points.items()
              if label.split("/", 1)[0] == config]
    attempts = [max(1, record.attempts) for _, record in points]
    # A launch followed by another of the same server may have ended mid-point (a machine
    # taken back): that attempt is in no record, and the resumed sweep measured the point again
    # on the next launch. Where the extra flushes are exactly those launches' last, drop them.
    cut = sum(1 for launch in per_launch[:-1] if launch)
    if cut and len(segments) == sum(attempts) + cut:
        segments = [seg for launch in per_launch[:-1] for seg in launch[:-1]] + per_launch[-1]
    if len(segments) == sum(attempts):
        last = [sum(attempts[: i + 1]) - 1 for i in range(len(points))]
    elif len(segments) == len(points):  # attempts not recorded per flush
        last = list(range(len(points)))
    else:
        return {}, (f"the {config} server's logs hold {len(segments)} cache flushes for "
                    f"{len(points)} points ({sum(attempts)} attempts), so which lines belong "
                    "to which point is unknown")
    out: dict[PointKey, list[DecodeInterval]] = {}
    for (label, record), index in zip(points, last, strict=True):
        key = _point_key(label)
        if key is not None and record.status == "ok":
            out[key] = parse_decode_lines(segments[index])
    return out, None
