"""What a measured point or a started server says about going on: the sweep's verdicts.

- :func:`failed_requests`: a window whose requests all failed, or that got no token, is not a
  measurement; the sweep stops that configuration with the server's own words.
- :func:`stalled`: a window with no token while the server counted running requests is a stall
  (a kernel compiled on first use), not a broken server; the sweep measures it again.
- :func:`check_context`: prompt sets that cannot fit the server's context are refused before
  any load.
- :func:`switches_since`: the runtime-state switches an adaptive server's log shows during a
  point (an open-loop point's batch moves across T).
- :func:`went_away`: what to say of a server that died mid-point: the cause its log gives, if
  specbench knows the line (engines/diagnose.py), and where that log is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from specbench import metrics, prompts
from specbench.engines import Server, diagnose
from specbench.engines.process import kept_log_path
from specbench.errors import ConfigError
from specbench.load import runner

# How much of the server's answer the one-line error quotes.
_SAID_CHARS = 120
# Failures that are the server's answer. A timeout is the client's limit (--request-timeout-s)
# and a refused or reset connection is the dead-server path (restart, or stop): a point that
# has only those is kept, flagged error_budget.
_ANSWERED = ("http_status", "malformed_chunk", "server_error", "stream_truncated")


def failed_requests(result: runner.PointResult) -> str | None:
    """What the server said when every request of a point failed; None when any succeeded.

    A point whose requests all failed measures nothing (0 tok/s is not the server's speed), so
    the sweep stops that configuration instead of recording it. Success is a request that
    ended "ok": requests cut by the window's end do not count either way (a stream that breaks
    halfway looks healthy until then). Failed: none succeeded and the server answered some
    with a failure (`_ANSWERED`), or none was sent in the window (every user backing off) after
    a warmup where all failed, or none got a single token inside the window (a server that
    accepts requests and never answers, or whose streams all stalled: they time out or are cut
    at the window's end). The quote is the most
    common answered failure: its HTTP status and the start of the server's error body, or the
    parser's reason for a stream that is not what SGLang sends.
    """
    records = result.records
    if any(r.status == "ok" for r in records):
        return None
    errors = [r for r in records if r.status == "error" and r.error_class in _ANSWERED]
    if not records:
        if result.warmup_records and result.warmup_errors == result.warmup_records:
            return (f"all {result.warmup_records} requests of the warmup failed and none was "
                    "sent in the window")
        return None
    if not errors:
        start, end = result.window_start, result.window_end
        if any(metrics.window_tokens(r.chunk_t, r.chunk_tokens, start, end) > 0
               for r in records):
            return None  # streams were flowing when the window cut them: a slow server
        return (f"the server sent no token to any of {len(records)} requests in "
                f"{result.window_wall_s:.0f} s of the window, so the point is not a "
                "measurement; it accepts requests but does not answer them (or its streams "
                "stalled)")
    classes = [str(r.error_class) for r in errors]
    worst = max(sorted(set(classes)), key=classes.count)
    first = next(r for r in errors if r.error_class == worst)
    detail = " ".join((first.error_detail or "").split())
    if detail.startswith("HTTP ") and ": " in detail:
        head, body = detail.split(": ", 1)
        quote = f"{head}: {body[:_SAID_CHARS]}"
    else:
        quote = f"{worst}: {detail[:_SAID_CHARS]}" if detail else worst
    n = sum(r.status == "error" for r in records)
    return (f"all {n} requests in the window failed ({worst}), so the point is not a "
            f"measurement; the server said {quote}")


# A window is a stall's when no request in flight got a token for this share of it, and for
# this many of the point's median times to first token: a decode step takes milliseconds, and
# a point whose prefills are long (long contexts) has long first tokens everywhere, so only a
# server doing something else (compiling) stays silent that long with requests running.
STALL_SHARE = 0.5
STALL_TTFTS = 5.0


def stalled(result: runner.PointResult) -> str | None:
    """Why a window measured a stall rather than the server, or None.

    For half the window or more (and five of the point's median times to first token), no token
    reached any request in flight while the server's own gauge counted running requests: the
    server was busy elsewhere, as SGLang is while it compiles a kernel on first use
    (FlashInfer's cascade module at the first prefix-cache hit: 8-10 s on an H200). The compile
    can start inside the window, at the first request that hits the cache after the warmup's (a
    real c=1 window held one request and then 4.5 s of nothing). That is a warmup that ended
    too soon, not a broken server.
    """
    records, start, end = result.records, result.window_start, result.window_end
    if not records or end <= start:
        return None
    running = [s.values.get("sglang:num_running_reqs", 0.0) for s in result.gauges]
    for snap in (result.metrics_before, result.metrics_after):
        if snap is not None:
            running.append(snap.values.get("sglang:num_running_reqs", 0.0))
    if max(running, default=0.0) <= 0:
        return None
    window_s = end - start
    ttfts_s = [r.t_first_token - r.t_send for r in records if r.t_first_token is not None]
    floor_s = STALL_TTFTS * float(np.median(ttfts_s)) if ttfts_s else 0.0
    gap_s, since = _longest_silence(records, start, end, max(STALL_SHARE * window_s, floor_s))
    if gap_s <= 0:
        return None
    whole = "the whole" if gap_s >= window_s - 1e-9 else "of the"
    return (f"the server sent no token to any of {len(records)} requests for "
            f"{gap_s:.1f} s ({whole} {result.window_wall_s:.1f}-s window, from "
            f"{since - start:+.1f} s) while it counted up to {max(running):.0f} running "
            "requests: a stall, such as a kernel compiled on first use")


def _longest_silence(
    records: list[Any], start: float, end: float, min_s: float
) -> tuple[float, float]:
    """(seconds, start) of the longest stretch of the window, at least `min_s` long, in which
    requests were in flight and none of them got a token; (0, start) if there is none."""
    inside = [r.chunk_t[(r.chunk_t > start) & (r.chunk_t < end)] for r in records]
    marks = np.unique(np.concatenate([[start, end], *inside]))
    gaps = np.diff(marks)
    best, best_from = 0.0, start
    for i in np.flatnonzero(gaps >= min_s):  # a few at most: checked one by one
        a, b = float(marks[i]), float(marks[i + 1])
        for r in records:  # the part of the gap this request was in flight
            lo, hi = max(a, r.t_send), min(b, r.t_end)
            if hi - lo >= min_s and hi - lo > best:
                best, best_from = hi - lo, lo
    return best, best_from


def check_context(info: dict[str, Any], sets: dict[str, prompts.PromptSet]) -> None:
    """Refuse, before any load, prompt sets whose prompts cannot fit the server's context.

    SGLang answers 400 when prompt + max_tokens exceeds the context length (unless it runs
    with --allow-auto-truncate); every such request would count as an error. Prompt sizes are
    estimated (about 4 characters per token), so only requests past the limit are named.
    """
    context = info.get("context_length")
    if not isinstance(context, int):  # not set at launch: the model's own (from /v1/models)
        context = info.get("max_model_len")
    if not isinstance(context, int) or info.get("allow_auto_truncate"):
        return
    lines = []
    for name, ps in sets.items():
        over = [r for r in ps.requests if r.est_input_tokens + r.max_tokens > context]
        if over:
            worst = max(over, key=lambda r: r.est_input_tokens + r.max_tokens)
            lines.append(
                f"prompt set {name}: {len(over)} of {len(ps.requests)} requests need more than "
                f"the server's context length {context} (longest {worst.id}: about "
                f"{worst.est_input_tokens} prompt + {worst.max_tokens} output tokens); raise "
                "--context-length, launch with --allow-auto-truncate or drop those prompts"
            )
    if lines:
        raise ConfigError("\n".join(lines))


# SGLang logs one line per runtime-state switch of an adaptive server (0.5.23, the reference).
SWITCH_LINE = b"Switch adaptive runtime state"


def log_size(path: Path | None) -> int | None:
    """Where a server's log ends now (None: no log, an attached server)."""
    try:
        return path.stat().st_size if path is not None else None
    except OSError:
        return None


def _log_since(path: Path | None, start: int | None) -> bytes | None:
    """What the server logged since `start` (None: no log, or it cannot be read)."""
    if path is None or start is None:
        return None
    try:
        with open(path, "rb") as log:
            log.seek(start)
            return log.read()
    except OSError:
        return None


def switches_since(path: Path | None, start: int | None) -> int | None:
    """Runtime-state switches the server logged since `start` (SGLang logs one line each)."""
    text = _log_since(path, start)
    return None if text is None else text.count(SWITCH_LINE)


# How long a server that went away mid-point may take to exit before its log is read.
EXIT_WAIT_S = 3.0


def went_away(mode: str, server: Server, log_from: int | None, restarting: bool) -> str:
    """The message for `mode`'s server that died mid-point (`log_from`: its log's size when the
    point began; `restarting`: the sweep starts it again, which moves its log aside)."""
    # A crashing server logs why as it exits: the client can see its connections drop first.
    server.wait_exit(EXIT_WAIT_S)
    # It may have died between points, before this one's log began; the log is this launch's
    # alone (a relaunch moves it aside), so its whole text is this server's.
    cause = crash_cause(server.log_path, log_from) or crash_cause(server.log_path, 0)
    log_path = server.log_path
    if restarting and log_path is not None:
        log_path = kept_log_path(log_path)  # where process.fresh_log will keep it
    return (f"the {mode} server went away mid-point" + (f": {cause}" if cause else "")
            + "; " + (f"see its log {log_path}" if log_path
                      else f"it stopped answering at {server.base_url}"))


def crash_cause(path: Path | None, start: int | None) -> str | None:
    """What the server logged since `start` as the reason it died (the diagnosis' summary, e.g.
    a TP rank's crash line); None for no log or no line specbench recognises."""
    text = _log_since(path, start)
    found = diagnose.diagnose_failure(text.decode(errors="replace")) if text else None
    return found.summary if found else None
