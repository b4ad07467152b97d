"""Which tests may run side by side (pytest-xdist) and which must run alone.

CI (.ci/run) runs the suite in two passes on its 2-core machine:

    python3 -m pytest -q -n 3 --dist loadgroup -m "not serial"   # three workers
    python3 -m pytest -q -m serial                                # one process

side by side: the first in the background at idle priority, so that it gets only the CPU the
timed second pass leaves (the contract tests run once SGLang's venv, installed in the
background too, is ready; the default sweep's end-to-end test runs alone after the first
pass, since it places a threshold from what it measures). A test that fails in either pass runs
once more, alone.

A test is `serial` when what it asserts depends on the wall clock: the simulator or a fake
server runs in real time (``--sim-time-scale``) and the test checks throughput, latency, a
ratio of timings, a flag the sweep derives from timings (``client_bound``, ``ran_below_c``,
stalls and timeouts), a decision made from measured curves (the crossing, the threshold), or
that something happened within N seconds. Beside another worker on two cores such a test
measures the other worker as well; CI has failed before on tests at the edge. Everything else
(pure functions, parsers, the CLI's refusals, the contract tests against SGLang's own code)
runs on three workers (the contract tests on two).

Without ``-n`` / ``-m`` (the README's ``python3 -m pytest -q``) every test runs, one after
another, as before. A new test file under a folder of live-server tests (see
:data:`SERIAL_DIRS`) is serial unless named in :data:`PARALLEL_FILES` (a single test of such a
file that times nothing: :data:`PARALLEL_TESTS`); any test may also mark itself
``@pytest.mark.serial``.

On the workers a test goes wherever a worker is free, except that the tests of a file with a
module- or session-scoped fixture of its own (a shared simulated server, a shared sweep) are one
group (``xdist_group``), so that fixture starts once, on one worker; the oracle's two files are
one group, since its session fixture starts SGLang's server twice.
Ports come from the kernel (``free_port``), never a fixed number, so workers cannot collide.
"""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

# Folders of live-server tests: a file here that is not listed in PARALLEL_FILES runs serially
# as a whole (so does a new one, until someone has read it and listed it).
SERIAL_DIRS = ("e2e", "load")

# Files in those folders whose tests assert nothing timed (the CLI's refusals, parsers on bytes,
# what a sweep leaves on disk, exit codes and messages), apart from the tests in SERIAL_TESTS.
PARALLEL_FILES = {
    "e2e/test_attach.py",
    "e2e/test_bad_input.py",
    "e2e/test_config_cli.py",
    "e2e/test_context_sweep.py",
    "e2e/test_faults.py",
    "e2e/test_filesystem.py",
    # rates achieved by the count of scheduled arrivals, goodput and switches present: untimed
    # (but for the goodput crossing, in SERIAL_TESTS)
    "e2e/test_open_loop.py",
    "e2e/test_parallel.py",
    "e2e/test_ray.py",
    "e2e/test_reference_name.py",
    "e2e/test_sglang_behaviour.py",
    "e2e/test_shards.py",
    "e2e/test_sweep.py",
    # the option's refusals, defaults and estimate: no sweep
    "e2e/test_window_requests.py",
    "load/test_failing_servers.py",
    "load/test_http1.py",
    "load/test_protocols.py",
    "load/test_protocols_oracle.py",
    "load/test_request_body.py",
}

# Files elsewhere whose every test is timed against the wall clock (inter-token gaps, step
# times, rates, stalls, "within N s"). Together with the SERIAL_DIRS files not in
# PARALLEL_FILES: e2e/test_adaptive_sweep.py (levels placed at the measured crossing),
# e2e/test_regress_gate.py (throughput and client_bound against a reference),
# load/test_first_use_stall.py, load/test_flags_planted.py, load/test_procs.py,
# load/test_runner.py and load/test_sim_fidelity.py (the runner's windows and flags).
SERIAL_FILES = {
    "sim/test_frontend.py",
    "sim/test_kv_pool.py",
    "sim/test_server.py",
    "sim/test_server_adaptive.py",
    "sim/test_server_faults.py",
    "engines/test_process.py",
    "test_sweep_signals.py",
}

# Single timed tests in files that otherwise run on the workers ("file::test", any parameters).
SERIAL_TESTS = {
    # goodput crosses where EAGLE-3 misses the TPOT SLO at 32 req/s: beside two other workers a
    # fresh-clone CI read EAGLE-3 ahead there (alone its goodput ratio is 0.33)
    "e2e/test_open_loop.py::test_an_open_loop_sweep_reports_goodput_and_the_dynamic_server",
    # throughput within 25 % of a sequential run
    "e2e/test_parallel.py::test_a_tune_run_on_two_gpus_matches_the_sequential_one",
    # "servers stopped within 10 s" after SIGINT / SIGTERM
    "e2e/test_sweep.py::test_signal_stops_servers_keeps_points",
    # servers that live 1.5 wall seconds: a slower start-up would leave no point finished
    "e2e/test_faults.py::test_crash_after_seconds_restarts_and_completes",
    "e2e/test_faults.py::test_crash_after_seconds_without_retries_stops_cleanly",
    # a crash planted 1.5 s into a point must land in its window, not its warmup
    "load/test_failing_servers.py::test_a_server_restarted_within_a_point_keeps_it_flagged",
    # accept length from counters vs the stream, and the gauge, at the window's edges
    "engines/test_versions.py::test_acceptance_comes_from_the_server_counters_when_the_stream_has_none",
    "engines/test_versions.py::test_a_window_where_nothing_finished_takes_the_servers_gauge",
    "engines/test_gpu_count.py::test_tp_size_beyond_the_visible_gpus_ends_the_cli_in_seconds",
    # calibrated tok/s; a planted 10 % slowdown; prefill latency with a warm cache
    "sim/test_moe_profile.py::test_sweep_reproduces_the_measured_moe_case",
    "test_compare.py::test_planted_step_slowdown_is_reported_within_two_points",
    "sim/test_prefixcache.py::test_cached_prefix_makes_prefill_cheaper",
    "test_progress.py::test_the_runner_keeps_the_live_view_up_to_date",
    # a 2,500-token request must outlast four flush calls (beside other workers it did not)
    "sim/test_server_sglang_rules.py::test_flush_cache_with_and_without_timeout",
    # a step's bookkeeping in milliseconds of CPU (beside two workers one CI read 10x its cost)
    "sim/test_scheduler.py::test_bookkeeping_of_a_250_request_step_is_cheap",
}

# Single tests in otherwise serial files that time nothing ("file::test", any parameters): a
# refusal, a dry run, a pure function, a server's self-description. They run on the workers.
# (e2e/test_regress_gate.py::test_mismatched_levels_are_refused times nothing, but stays
# serial: it reads the reference sweep of the file's timed tests, a module fixture that a worker
# would sweep a second time.)
PARALLEL_TESTS = {
    # the job's plan and commands, printed by --dry-run: nothing is launched
    "e2e/test_gpu_regression_job.py::test_the_jobs_plan_with_its_defaults",
    "e2e/test_gpu_regression_job.py::test_servers_the_job_started_are_attached",
    # the plan's choice from a given launch time: pure functions
    "e2e/test_plan_auto.py::test_real_sglang_leaves_the_plan_to_the_launch_time",
    "e2e/test_plan_auto.py::test_the_break_even_weighs_saved_points_against_extra_launches",
    # /server_info's fields, read from a simulated server that measures nothing
    "e2e/test_explain.py::test_the_simulators_server_info_says_what_sglang_resolved",
}

# Files that share one session fixture: one xdist group.
GROUPS = {"engines/oracle/": "oracle"}


def _where(item: pytest.Item) -> tuple[str, str]:
    """(file relative to tests/, test name without parameters)."""
    path = Path(str(item.fspath)).resolve()
    try:
        rel = path.relative_to(TESTS).as_posix()
    except ValueError:  # a test file given from outside tests/
        rel = path.as_posix()
    return rel, item.name.split("[", 1)[0]


def is_serial(item: pytest.Item) -> bool:
    if item.get_closest_marker("serial") is not None:
        return True
    rel, name = _where(item)
    if f"{rel}::{name}" in PARALLEL_TESTS:
        return False
    if f"{rel}::{name}" in SERIAL_TESTS or rel in SERIAL_FILES:
        return True
    return rel.split("/", 1)[0] in SERIAL_DIRS and rel not in PARALLEL_FILES


def _shares_a_fixture(item: pytest.Item) -> bool:
    """Whether the test uses a module-, class- or session-scoped fixture of this suite's own."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return True  # cannot tell: keep the file together
    return any(
        fixturedef.scope != "function" and fixturedef.baseid.startswith("tests")
        for fixturedefs in info.name2fixturedefs.values()
        for fixturedef in fixturedefs
    )


# First: xdist's own hook turns the xdist_group marks into the groups it schedules by.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    xdist = config.pluginmanager.hasplugin("xdist")
    for item in items:
        rel, _ = _where(item)
        if is_serial(item):
            item.add_marker(pytest.mark.serial)
        group = next((g for prefix, g in GROUPS.items() if rel.startswith(prefix)), None)
        if group is None and _shares_a_fixture(item):
            group = rel
        if xdist and group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
