"""Process entry of the simulated server: parse, resolve, start up like SGLang, serve, stop.

:func:`main` is what ``python -m specbench.sim`` and ``specbench sim`` run (through
`__main__.py`, which arms the parent-death signal before anything heavy is imported).
:func:`serve` prints SGLang's start-up lines in SGLang's order, because harnesses wait for
them (the ready line above all), then runs the app until SIGTERM or SIGINT. Exit codes follow
SGLang: 2 for a command-line error, 1 for a failed start or a crash, 0 after a signal, and
killed by SIGKILL when one of the `--tp-size` rank processes dies (ranks.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from typing import Any

from aiohttp import web

from specbench.sim.app import READY_LINE, SimServer
from specbench.sim.args import ServerSettings, StartupError, build_parser, resolve
from specbench.sim.costmodel import Profile, ProfileError, load_profile
from specbench.sim.faults import crash_after
from specbench.sim.logs import log, setup_logging
from specbench.sim.ranks import WATCHDOG_INTERVAL_S, RankProcesses, start_ranks

_SHUTDOWN_TIMEOUT_S = 0.5  # aiohttp's grace for open connections
_CLEANUP_TIMEOUT_S = 2.0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m specbench.sim``; returns the process exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    ns = build_parser().parse_args(args)  # exits 2 on unknown/ambiguous flags, like SGLang
    try:
        profile = load_profile(ns.sim_profile)
    except ProfileError as exc:
        print(f"specbench.sim: {exc}", file=sys.stderr, flush=True)
        return 2
    setup_logging(ns.log_level)
    try:
        settings = resolve(ns, profile, argv=tuple(args))
    except StartupError as exc:
        for line in exc.lines:
            print(line, file=sys.stderr, flush=True)
        return exc.exit_code
    try:
        # Forked here, before the event loop and its threads exist (ranks.py).
        ranks = start_ranks(settings.tp_size)
    except OSError as exc:
        print(f"specbench.sim: cannot start the --tp-size {settings.tp_size} rank processes: "
              f"{exc}", file=sys.stderr, flush=True)
        return 1
    try:
        if ranks is not None:
            ranks.watch()
        return asyncio.run(serve(settings, profile, ranks))
    except KeyboardInterrupt:
        return 0
    finally:
        if ranks is not None:
            ranks.stop()


async def serve(
    settings: ServerSettings, profile: Profile, ranks: RankProcesses | None = None
) -> int:
    """Run the server until SIGTERM/SIGINT; return the exit code. `ranks`: the stand-in
    processes of TP ranks 1.. (--tp-size > 1), already started and watched."""
    sim = SimServer(settings, profile)
    _log_launch(settings, profile, ranks)
    if settings.faults.fail_start is not None:
        print(settings.faults.fail_start, file=sys.stderr, flush=True)
        return 1
    _log_loaded(sim)
    stop = asyncio.Event()
    received: list[str] = []

    def on_signal(name: str) -> None:
        received.append(name)
        stop.set()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig.name)

    runner = web.AppRunner(sim.make_app(), access_log=None, shutdown_timeout=_SHUTDOWN_TIMEOUT_S)
    await runner.setup()
    if not await _bind(runner, settings):
        return 1
    workers = [asyncio.create_task(sim.scheduler.run(), name="Scheduler")]
    if sim.frontend.enabled:
        workers.append(asyncio.create_task(sim.frontend.run(), name="TokenizerManager"))
    tasks: list[asyncio.Task[Any]] = [*workers, asyncio.create_task(_start_up(sim))]
    stop_wait = asyncio.create_task(stop.wait())
    await asyncio.wait([stop_wait, *workers], return_when=asyncio.FIRST_COMPLETED)
    for worker in workers:
        crash = worker.exception() if worker.done() else None
        if crash is not None:
            name = worker.get_name()
            log("warning", f"{name} hit an exception: {type(crash).__name__}: {crash}")
            return 1
    log("info", f"Received {received[0] if received else 'stop'}; shutting down.")
    sim.status = "Shutting down"
    sim.scheduler.stop()
    for task in tasks:
        task.cancel()
    with contextlib.suppress(Exception):
        await asyncio.wait_for(runner.cleanup(), timeout=_CLEANUP_TIMEOUT_S)
    return 0


def _log_launch(s: ServerSettings, profile: Profile, ranks: RankProcesses | None) -> None:
    """SGLang's first lines: the server args, resolution notes, then weight loading begins."""
    log(
        "info",
        f"server_args=ServerArgs(model_path={s.model_path!r}, host={s.host!r}, port={s.port}, "
        f"tp_size={s.tp_size}, max_running_requests={s.max_running_requests}, "
        f"speculative_algorithm={s.speculative_algorithm!r}, speculative_num_steps="
        f"{s.speculative_num_steps}, speculative_eagle_topk={s.speculative_eagle_topk}, "
        f"speculative_num_draft_tokens={s.speculative_num_draft_tokens}, speculative_adaptive="
        f"{s.speculative_adaptive}, cuda_graph_bs_decode={s.cuda_graph_bs_decode}, "
        f"sim_profile={profile.name!r}, sim_time_scale={s.sim_time_scale})",
    )
    for level, message in s.startup_log:
        log(level, message)
    for flag in s.ignored_flags:
        log("info", f"specbench.sim: {flag} accepted; it has no effect in the simulator")
    # Recorded, never used: a parallel sweep's tests check which GPUs each server was given.
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        log("info", f"specbench.sim: CUDA_VISIBLE_DEVICES={visible} (recorded; runs on the CPU)")
    if ranks is not None:
        # Where a person (or a test) finds the processes to kill to rehearse a dead rank.
        log(
            "info",
            f"specbench.sim: tp_size={s.tp_size}: scheduler_0 runs in this process "
            f"(pid={os.getpid()}); stand-in rank processes {ranks.describe()}, checked every "
            f"{WATCHDOG_INTERVAL_S:g} s",
        )
    log("info", f"Load weight begin. avail mem={profile.memory.gpu_memory_bytes / 2**30:.2f} GB")


def _log_loaded(sim: SimServer) -> None:
    """SGLang's lines once weights, KV pool and CUDA graphs are ready (instantly, here)."""
    s, profile, sch = sim.settings, sim.profile, sim.scheduler
    log(
        "info",
        f"Load weight end. type={profile.architecture}, dtype=torch.bfloat16, "
        f"mem usage={profile.memory.target_weights_bytes / 2**30:.2f} GB.",
    )
    log("info", f"KV Cache is allocated. #tokens: {sch.kv_capacity_tokens}")
    log("info", "Capture cuda graph begin. This can take up to several minutes.")
    log("info", "Capture cuda graph end. Time elapsed: 0.00 s.")
    log(
        "info",
        f"max_total_num_tokens={sch.kv_capacity_tokens}, chunked_prefill_size="
        f"{s.chunked_prefill_size}, max_prefill_tokens=16384, max_running_requests="
        f"{s.max_running_requests}, context_len={s.context_length}",
    )
    if s.faults.cap_running:
        log(
            "info",
            f"specbench.sim: running requests silently capped at {sch.effective_max_running} "
            "(--sim-cap-running)",
        )


async def _bind(runner: web.AppRunner, s: ServerSettings) -> bool:
    """Listen on --host:--port; on failure log uvicorn's error line and clean up."""
    site = web.TCPSite(runner, s.host, s.port)
    try:
        await site.start()
    except OSError as exc:
        log(
            "warning",
            f"ERROR:    [Errno {exc.errno}] error while attempting to bind on address "
            f"({s.host!r}, {s.port}): {exc.strerror}",
        )
        await runner.cleanup()
        return False
    log("info", f"Uvicorn running on http://{s.host}:{s.port} (Press CTRL+C to quit)")
    return True


async def _start_up(sim: SimServer) -> None:
    """Warm up, then declare the server ready; --sim-crash-after-s counts from then."""
    faults = sim.settings.faults
    if faults.slow_start_s > 0:
        await asyncio.sleep(faults.slow_start_s)
    if not sim.settings.skip_server_warmup:
        await sim.warmup()
        log("info", "End of prefill warmup with status 200, resp: [{...}]")
    sim.status = "Up"
    log("info", READY_LINE)
    if faults.crash_after_s is not None:
        await crash_after(faults.crash_after_s)
