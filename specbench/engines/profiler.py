"""SGLang's own torch profiler, asked for a few steps at a chosen level while a point runs.

``specbench sweep --profile-steps 16,64`` profiles each server once at each of those levels
(the first repeat of each prompt set). While the point's load runs, a thread here waits until
the window has nearly run its length with the level's users in the server (its running-requests
gauge at 90% of the level or more), then POSTs SGLang's ``/start_profile`` for
:data:`PROFILE_STEPS` forwards into the run directory. Asked near the window's end, the
profiled steps are steady load and SGLang's writing of the traces (it pauses the scheduler)
falls mostly after the window closes. Once the point is done, the traces of every rank are read
(:mod:`specbench.analysis.kernels`) and the split is stored beside them. A profile that could
not be taken never fails the point: its ``split.json`` says why.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

from specbench.analysis.kernels import (
    SPLIT_FILE,
    PointProfile,
    TraceError,
    profile_dir,
    rank_traces,
    split_point,
    write_profile,
)
from specbench.engines.base import Server
from specbench.engines.process import http_get
from specbench.load.records import LiveView, PointSpec
from specbench.results import PointKey

PROFILE_STEPS = 20  # scheduler forwards per profile: a steady mean, a short pause to write it
# CPU activity brings SGLang's forward spans (draft, verify, decode, prefill) into the trace;
# without it the draft's kernels cannot be told from the target's. No Python stacks, no shapes:
# they would make the host slower and the traces larger.
ACTIVITIES: tuple[str, ...] = ("CPU", "GPU")
MIN_RUNNING_FRACTION = 0.9  # long prompts keep a few of the level's users in prefill
LEAD_S = 2.0  # ask this long (wall) before the window's end, at most half the window
POLL_S = 0.05  # a cheap check of the live view; the gauge is read only once due
TRACE_WAIT_S = 120.0  # SGLang writes a CPU+GPU trace of 20 forwards in seconds; a big TP more
TRACE_SETTLE_S = 2.0  # the rank files unchanged this long: every rank has written its trace
# No trace this long after the point: its steps may not all have run (the load ended first);
# /stop_profile then makes SGLang write what it has.
TRACE_FIRST_WAIT_S = 30.0
RUNNING_GAUGE = "sglang:num_running_reqs"
# Never through HTTP(S)_PROXY: the server is on this host or the cluster's own network.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def running_requests(base_url: str, token: str | None = None) -> float | None:
    """SGLang's running-requests gauge summed over its label sets; None if unreadable."""
    try:
        status, page = http_get(base_url.rstrip("/") + "/metrics", timeout_s=2.0, token=token)
    except (OSError, urllib.error.URLError):
        return None
    if status != 200:
        return None
    total = None
    for line in page.decode(errors="replace").splitlines():
        if line.startswith((RUNNING_GAUGE + "{", RUNNING_GAUGE + " ")):
            with contextlib.suppress(ValueError):
                total = (total or 0.0) + float(line.rsplit(maxsplit=1)[-1])
    return total


def _post(base_url: str, route: str, body: dict[str, object] | None,
          token: str | None) -> str | None:
    """POST `body` (JSON) to `route`; None on success, else why not (one line)."""
    data = json.dumps(body).encode() if body is not None else b""
    request = urllib.request.Request(base_url.rstrip("/") + route, data=data, method="POST",
                                     headers={"Content-Type": "application/json"})
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with _DIRECT.open(request, timeout=30.0) as response:
            response.read()
            return None
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return (f"the server has no {route} (HTTP 404): --profile-steps needs a real "
                    "SGLang server")
        text = exc.read().decode(errors="replace").strip()[:200]
        return f"{route} answered HTTP {exc.code}: {text}"
    except (OSError, urllib.error.URLError) as exc:
        return f"{route} did not answer ({exc})"


def ask_profile(base_url: str, out_dir: Path, steps: int, token: str | None = None,
                activities: tuple[str, ...] = ACTIVITIES) -> str | None:
    """POST /start_profile for `steps` forwards into `out_dir`; None when SGLang took it, else
    why not (one line)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    return _post(base_url, "/start_profile", {
        "output_dir": str(out_dir.resolve()), "num_steps": steps,
        "activities": list(activities), "profile_id": out_dir.name,
        "with_stack": False, "record_shapes": False}, token)


def stop_profile(base_url: str, token: str | None = None) -> str | None:
    """POST /stop_profile: SGLang writes what it has (a profile whose steps never all ran)."""
    return _post(base_url, "/stop_profile", None, token)


def _trace_sizes(folder: Path) -> tuple[tuple[str, int], ...]:
    sizes = []
    for path in rank_traces(folder).values():
        with contextlib.suppress(OSError):  # a file being renamed into place
            sizes.append((path.name, path.stat().st_size))
    return tuple(sorted(sizes))


def wait_for_traces(folder: Path, ranks: int = 1, timeout_s: float = TRACE_WAIT_S,
                    settle_s: float = TRACE_SETTLE_S) -> int:
    """Wait until `ranks` traces are in `folder` and none has changed for `settle_s` (each rank
    writes its own); the number found when they are, or when `timeout_s` has passed."""
    deadline = time.monotonic() + timeout_s
    seen: tuple[tuple[str, int], ...] = ()
    stable_since = time.monotonic()
    while time.monotonic() < deadline:
        now = _trace_sizes(folder)
        if now != seen:
            seen, stable_since = now, time.monotonic()
        elif len(seen) >= ranks and time.monotonic() - stable_since >= settle_s:
            break
        time.sleep(POLL_S)
    return len(seen)


def expected_ranks(info: dict[str, object]) -> int:
    """The trace files a profile of this server writes: one per tensor- and pipeline-parallel
    rank (its /server_info; 1 where it does not say)."""
    count = 1
    for key in ("tp_size", "pp_size"):
        value = info.get(key)
        if isinstance(value, int) and value > 0:
            count *= value
    return count


class PointProfiler:
    """Asks for one point's profile from a thread while its load runs; `finish` reads it."""

    def __init__(self, key: PointKey, server: Server, run_dir: Path, spec: PointSpec,
                 steps: int = PROFILE_STEPS, trace_wait_s: float = TRACE_WAIT_S) -> None:
        self.key = key
        self.trace_wait_s = trace_wait_s
        self.server = server
        self.folder = profile_dir(run_dir, key.mode, key.prompt_set, key.concurrency)
        self.live: LiveView | None = spec.live
        self.window_s = spec.window_s  # wall seconds, before any stay open for more answers
        self.window_seen: float | None = None  # when the live view first showed the window
        self.steps = steps
        self.ranks = expected_ranks(server.info)
        self.token = server.admin_api_key or server.api_key
        self.stop = threading.Event()
        self.asked = False
        self.error: str | None = None
        self.running: float | None = None
        self.asked_in_window_s: float | None = None
        self.thread = threading.Thread(target=self._watch, name="profile-steps", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _due(self) -> bool:
        """Whether the point is where a profile should be asked for now."""
        live = self.live
        if live is None:
            return True
        if live.phase == "done":
            return True  # the window closed before it was due: the drain still runs the users
        if live.phase != "window":
            return False
        now = time.monotonic()
        if self.window_seen is None:
            self.window_seen = now
        # The live view is redrawn every half second: the elapsed time it shows lags.
        elapsed = max(live.window_elapsed_s, now - self.window_seen)
        return elapsed >= self.window_s - min(LEAD_S, self.window_s / 2)

    def _watch(self) -> None:
        level = self.key.concurrency
        while not self.stop.wait(POLL_S):
            if not self._due():
                continue
            running = running_requests(self.server.base_url, self.token)
            # An unreadable gauge (a server without --enable-metrics) does not hold it back.
            if running is not None and running < MIN_RUNNING_FRACTION * level:
                if self.live is not None and self.live.phase == "done":
                    self.error = (f"the server never ran {MIN_RUNNING_FRACTION:.0%} of {level} "
                                  f"requests near the window's end (last {running:.0f})")
                    return
                continue
            self.running = running
            if self.live is not None and self.live.phase == "window":
                assert self.window_seen is not None
                self.asked_in_window_s = max(self.live.window_elapsed_s,
                                             time.monotonic() - self.window_seen)
            self.error = ask_profile(self.server.base_url, self.folder, self.steps, self.token)
            self.asked = self.error is None
            return

    def finish(self) -> PointProfile:
        """Stop watching, read every rank's trace, store and return the split."""
        self.stop.set()
        self.thread.join(timeout=60.0)
        ranks = {}
        error = self.error
        if self.asked and not self.server.alive():
            error = "the server went away before it wrote the profile"
        elif self.asked:
            found = wait_for_traces(self.folder, self.ranks, min(self.trace_wait_s,
                                                                 TRACE_FIRST_WAIT_S))
            if found == 0:
                # The load may have ended before the steps did: SGLang then writes what it has
                # (an answer that nothing is being profiled means the traces are on their way).
                stop_profile(self.server.base_url, self.token)
            if found < self.ranks:
                found = wait_for_traces(self.folder, self.ranks, self.trace_wait_s)
            if found == 0:
                error = (f"no trace arrived in {self.folder} within {self.trace_wait_s:.0f} s: "
                         "SGLang writes it where it runs, so an attached server on another "
                         "host keeps it there (its log names the file)")
            else:
                try:
                    ranks = split_point(self.folder, speculative=self.server.config.speculative,
                                        steps_requested=self.steps)
                except TraceError as exc:
                    error = str(exc)
        elif error is None:
            error = "the point ended before the profile was asked for"
        profile = PointProfile(
            mode=self.key.mode, prompt_set=self.key.prompt_set,
            concurrency=self.key.concurrency, speculative=self.server.config.speculative,
            steps_requested=self.steps, activities=ACTIVITIES, ranks=ranks,
            ranks_expected=self.ranks,
            running_requests=self.running, asked_in_window_s=self.asked_in_window_s,
            error=error if not ranks else None)
        write_profile(self.folder, profile)
        return profile


def wanted(levels: tuple[int, ...], key: PointKey, run_dir: Path) -> bool:
    """Whether `key` is a point to profile: a chosen level, closed loop, the first repeat, and
    not profiled yet (a resumed or retried point keeps its profile)."""
    if key.request_rate is not None or key.repeat != 0 or key.concurrency not in levels:
        return False
    folder = profile_dir(run_dir, key.mode, key.prompt_set, key.concurrency)
    return not (folder / SPLIT_FILE).exists()


def profile_line(profile: PointProfile) -> str:
    """The sweep's one line about a profile it took (or could not take)."""
    where = f"{profile.mode} {profile.prompt_set} c={profile.concurrency}"
    step = profile.step
    if step is None:
        return f"[yellow]warning:[/] step profile {where}: {profile.error}"
    kinds = ", ".join(f"{kind} {ms:.2f}" for kind, ms in step.kinds_ms.items() if ms >= 0.005)
    unknown = profile.unknown_ms
    named = f"; unknown kernels: {', '.join(list(unknown)[:3])}" if unknown else ""
    return (f"step profile {where}: {step.step_ms:.2f} ms a step on the slowest of "
            f"{len(profile.ranks)} rank(s) ({profile.slowest_rank}): {kinds}{named}")


@contextlib.contextmanager
def during_point(levels: tuple[int, ...], key: PointKey, server: Server, run_dir: Path,
                 spec: PointSpec, say: Callable[[str], object]) -> Iterator[None]:
    """Profile the point's load (`spec`, its live view followed) if `key` is one of `levels`'
    points (else do nothing) and `say` what came of it. An interrupt or an error in the load
    stops the watch without waiting for traces."""
    if not levels or not wanted(levels, key, run_dir):
        yield
        return
    profiler = PointProfiler(key, server, run_dir, spec)
    profiler.start()
    try:
        yield
    except BaseException:
        profiler.stop.set()
        raise
    say(profile_line(profiler.finish()))
