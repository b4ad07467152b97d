"""`--profile-steps`: SGLang's torch-profiler traces split into a decode step's kinds of GPU
time, from every rank's trace (a synthetic two-rank trace in SGLang's format under
tests/fixtures/), asked from a small real HTTP server that answers as SGLang does, shown by
`specbench explain` beside the log-based step ratio; and the committed H100 profiles."""

from __future__ import annotations

import asyncio
import gzip
import json
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from rich.console import Console

from specbench import configurations
from specbench.analysis.explain import explain_run
from specbench.analysis.kernels import (
    PointProfile,
    kernel_kind,
    profile_dir,
    read_events,
    read_profiles,
    split_events,
    split_point,
    write_profile,
)
from specbench.config import build
from specbench.engines import profiler
from specbench.engines.base import Server
from specbench.engines.process import free_port
from specbench.errors import ConfigError
from specbench.load.records import LiveView, PointSpec
from specbench.report.blocks import Bullets
from specbench.report.why import explained, render_terminal, why_blocks
from specbench.results import PointKey, load_run
from tests.harness import run_cli

ROOT = Path(__file__).resolve().parents[1]
TWO_RANKS = ROOT / "tests" / "fixtures" / "profile-two-ranks"
GPU_RUNS = ROOT / "results" / "gpu"
STEPS_RUN = GPU_RUNS / "h100-sglang-0.5.17-llama8b-shape-q0.3-flashinfer-coding-steps"


def kernel(ts_us: float, dur_us: float, name: str) -> dict[str, object]:
    return {"ph": "X", "cat": "kernel", "ts": ts_us, "dur": dur_us, "name": name}


def write_trace(path: Path, events: list[dict[str, object]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": events}, f)
    return path


def test_every_ranks_trace_is_split_and_the_step_is_the_slowest_ranks() -> None:
    """The fixture: EAGLE-3 at 16 users on two ranks (Hopper names on one, Blackwell names on
    the other), two verify steps each: a draft stage of 1.7 ms of kernels, a verify of a 1 ms
    GEMM, the attention (2 ms; 2.4 on rank 1), a 0.5 ms all-reduce, a 0.3 ms norm, a 0.2 ms
    kernel no rule knows, a 0.1 ms copy to the host, and one 0.4 ms prefill forward."""
    ranks = split_point(TWO_RANKS, speculative=True, steps_requested=20)
    assert sorted(ranks) == ["TP-0", "TP-1"]
    for rank, attention, idle in (("TP-0", 2.0, 3.3), ("TP-1", 2.4, 3.1)):
        split = ranks[rank]
        assert (split.steps, split.steps_from) == (2, "spans")  # the verify spans, not the 20 asked
        assert split.kinds_ms == pytest.approx({
            "draft": 1.7, "verify_attention": attention, "decode_attention": 0.0,
            "prefill": 0.2, "gemm": 1.0, "communication": 0.5, "other": 0.4, "unknown": 0.2,
            "idle": idle})
        busy = sum(ms for kind, ms in split.kinds_ms.items() if kind != "idle")
        assert split.wall_ms == pytest.approx(busy + split.kinds_ms["idle"])  # no overlap here
        assert split.step_ms == pytest.approx(split.wall_ms - 0.2)
    profile = PointProfile("eagle3", "coding", 16, True, 20, ("CPU", "GPU"), ranks)
    assert profile.slowest_rank == "TP-1"
    assert profile.step is not None and profile.step.step_ms == pytest.approx(9.3)
    # Unknown kernels are named, each rank's own.
    assert profile.unknown_ms == pytest.approx({"my_fused_epilogue_v2": 0.2,
                                                "sm100_mystery_epilogue": 0.2})
    again = PointProfile.from_json(json.loads(json.dumps(profile.to_json())))
    assert again == profile


@pytest.mark.parametrize(("name", "kind"), [
    # Hopper
    ("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTT", "gemm"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_"
     "segment_k_off_kernel__5x_cublas", "gemm"),
    ("void deep_gemm::sm90_fp8_gemm_1d2d_impl<0u, 128u, 128u>(float*, int*, unsigned int)", "gemm"),
    ("cutlass3x_sm90_tensorop_s64x128x16gemm_bf16_bf16_f32_bf16_bf16_128x128x64_1x1x1_0_tnn_"
     "align8_warpspecialized_cooperative_epi_tma", "gemm"),
    ("void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<"
     "flash::CollectiveMainloopFwdSm90<2, cute::tuple<cute::C<1>>, bf16> > > >(...)", "attention"),
    ("void flash::prepare_varlen_num_blocks_kernel(int, int, int, int const*)", "attention"),
    ("void flashinfer::MergeStatesKernel<8u, 16u, 8u, 4u, __nv_bfloat16>(...)", "attention"),
    ("_fwd_kernel_stage1", "attention"),  # Triton decode attention
    ("_fwd_kernel", "attention"),  # Triton extend attention
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
     "communication"),
    ("void sglang::cross_device_reduce_2stage<__nv_bfloat16, 8>(...)", "communication"),
    ("void flashinfer::activation::act_and_mul_kernel<__nv_bfloat16, &silu>(...)", "other"),
    ("void flashinfer::BatchQKApplyRotaryPosIdsCosSinCacheKernel<true, 128u>(...)", "other"),
    ("create_flashinfer_kv_indices_triton", "other"),
    ("triton_poi_fused_add_mul_0", "other"),
    # Blackwell
    ("nvjet_sm100_tst_128x64_64x6_2x1_2cta_h_bz_TNT", "gemm"),
    ("sm100_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize256x128x64_cluster2x1x1_execute_kernel"
     "__5x_cublas", "gemm"),
    ("bmm_E4m3_E4m3E4m3_Fp32_t128x8x128u2_s6_et64x8_m64x8x32_cga1x1x1_16dp256b_TN_transOut_"
     "schedS_sm100f", "gemm"),
    ("void deep_gemm::sm100_fp8_gemm_1d1d_impl<128u>(int*, unsigned int)", "gemm"),
    ("fmhaSm100fKernel_QkvE4m3OBfloat16HQk128HV128HVPerCta128SeqLen128Persistent", "attention"),
    ("void cutlass::device_kernel<cutlass::fmha::kernel::Sm100FmhaMlaKernelTmaWarpspecialized"
     "<...> >(...)", "attention"),
    ("kernel_cutlass_kernel_flash_attncuteflash_fwd_sm100FlashAttentionForwardSm100_object",
     "attention"),
    ("void flashinfer::trtllm_allreduce_fusion::allreduce_fusion_kernel_twoshot_sync<bf16, 8>",
     "communication"),
    ("ncclDevKernel_AllReduce_Sum_bf16_NVLS(ncclDevKernelArgsStorage<4096ul>)", "communication"),
    ("sm100_mystery_epilogue", "unknown"),
])
def test_hopper_and_blackwell_kernel_names_are_classified(name: str, kind: str) -> None:
    assert kernel_kind(name) == kind


def test_a_trace_without_forward_spans_splits_by_kernel_name(tmp_path: Path) -> None:
    # GPU activity only (no spans): two steps over 20 ms, per step a GEMM of 3 ms, an attention
    # kernel of 1 ms overlapping the GEMM by 0.5 ms, another of 4 ms, a norm of 1 ms; the rest
    # idle. Its steps are the ones asked for; its attention is the verify's on a speculative
    # server and the decode's on a plain one.
    events: list[dict[str, object]] = [
        {"ph": "X", "cat": "cpu_op", "ts": 0, "dur": 50_000, "name": "aten::mm"}]
    for start in (0.0, 10_000.0):
        events += [kernel(start, 3000, "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTT"),
                   kernel(start + 2500, 1000, "BatchDecodeWithPagedKVCacheKernel"),
                   kernel(start + 4000, 4000, "BatchPrefillWithPagedKVCacheKernel<...>"),
                   kernel(start + 8500, 1000, "RMSNormKernel")]
    path = write_trace(tmp_path / "x-TP-0.trace.json.gz", events)
    spec = split_events(read_events(path), speculative=True, steps_requested=2)
    plain = split_events(read_events(path), speculative=False, steps_requested=2)
    assert spec is not None and plain is not None
    assert (spec.steps, spec.steps_from) == (2, "requested")
    assert spec.wall_ms == pytest.approx(9.75)  # first kernel start to last kernel end
    assert spec.kinds_ms["gemm"] == pytest.approx(3.0)
    assert spec.kinds_ms["verify_attention"] == pytest.approx(5.0)
    assert plain.kinds_ms["decode_attention"] == pytest.approx(5.0)
    assert spec.kinds_ms["other"] == pytest.approx(1.0)
    assert spec.kinds_ms["draft"] == spec.kinds_ms["prefill"] == 0.0  # not told apart by name
    # Busy 8.5 ms a step (the overlap counted once): 2 x 0.5 ms idle in each, 0.5 between them.
    assert spec.kinds_ms["idle"] == pytest.approx(1.25)
    assert spec.kernels_per_step == 4


# -- asking a server ------------------------------------------------------------------------------

@pytest.fixture
def fake_sglang(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """An HTTP server with SGLang's /metrics and /start_profile; the profile writes the
    fixture's two rank traces (gzipped, as SGLang names them), one rank after the other.
    `state["running"]` is the gauge it serves; `state["routes"]` False: no profiler routes."""
    state: dict[str, Any] = {"running": 0.0, "asked": [], "routes": True}

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(text=f'sglang:num_running_reqs{{model_name="m"}} {state["running"]}\n'
                                 'sglang:num_queue_reqs{model_name="m"} 0.0\n')

    def write_ranks(out: Path, profile_id: str) -> None:
        for rank in (0, 1):
            time.sleep(0.3)
            text = (TWO_RANKS / f"eagle3-coding-c16-TP-{rank}.trace.json").read_text()
            with gzip.open(out / f"{profile_id}-TP-{rank}.trace.json.gz", "wt") as f:
                f.write(text)

    async def start_profile(request: web.Request) -> web.Response:
        if not state["routes"]:
            raise web.HTTPNotFound()
        body = await request.json()
        state["asked"].append(body)
        threading.Thread(target=write_ranks,
                         args=(Path(body["output_dir"]), body["profile_id"])).start()
        return web.Response(text="Start profiling.\n")

    port = free_port()
    loop = asyncio.new_event_loop()
    app = web.Application()
    app.add_routes([web.get("/metrics", metrics), web.post("/start_profile", start_profile)])
    runner = web.AppRunner(app, access_log=None)
    loop.run_until_complete(runner.setup())
    loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", port).start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    state["url"] = f"http://127.0.0.1:{port}"
    yield state
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=5)
    loop.run_until_complete(runner.cleanup())
    loop.close()


def _server(url: str) -> Server:
    return Server(configurations.parse("eagle3"), url, [], {}, 1.0, info={"tp_size": 2})


def _spec(url: str, live: LiveView, window_s: float) -> PointSpec:
    return PointSpec(base_url=url, protocol="openai-chat", model="m", concurrency=16,
                     requests=[], warmup_s=0.0, window_s=window_s, live=live)


def _window(live: LiveView, server: dict[str, Any], window_s: float = 1.0) -> None:
    """A point as the load generator shows it: warmup, then a window of `window_s`, the
    server's gauge at 8 running requests and then 16."""
    live.phase, live.window_s = "warmup", window_s
    server["running"] = 8.0
    time.sleep(0.4)
    live.phase, server["running"] = "window", 16.0
    opened = time.monotonic()
    while (elapsed := time.monotonic() - opened) < window_s:
        live.window_elapsed_s = elapsed
        time.sleep(0.05)
    live.phase = "done"


@pytest.mark.serial  # asked at a moment of a wall-clock window
def test_the_profile_is_asked_near_the_windows_end_and_every_rank_is_read(
        fake_sglang: dict[str, Any], tmp_path: Path) -> None:
    key = PointKey("eagle3", "coding", 16)
    live, said = LiveView(), []
    url = fake_sglang["url"]
    with profiler.during_point((16, 64), key, _server(url), tmp_path, _spec(url, live, 2.0),
                               said.append):
        _window(live, fake_sglang, window_s=2.0)
    (asked,) = fake_sglang["asked"]
    folder = profile_dir(tmp_path, "eagle3", "coding", 16)
    assert asked["output_dir"] == str(folder.resolve())
    assert asked["num_steps"] == profiler.PROFILE_STEPS
    assert asked["activities"] == ["CPU", "GPU"] and asked["with_stack"] is False
    (profile,) = read_profiles(tmp_path)
    assert sorted(profile.ranks) == ["TP-0", "TP-1"] and profile.error is None
    assert profile.ranks_expected == 2
    assert profile.running_requests == 16.0
    # asked in the window's second half (the last LEAD_S, at most half the window)
    assert profile.asked_in_window_s is not None and 1.0 <= profile.asked_in_window_s < 2.0
    assert profile.slowest_rank == "TP-1"
    (line,) = said
    assert "9.30 ms a step on the slowest of 2 rank(s) (TP-1)" in line
    assert "unknown kernels: my_fused_epilogue_v2, sm100_mystery_epilogue" in line
    # Another point at the level (a later attempt, a resume) keeps the profile it has; other
    # levels and repeats are not profiled.
    for other in (key, PointKey("eagle3", "coding", 32), PointKey("eagle3", "coding", 64, 1)):
        assert not profiler.wanted((16, 64), other, tmp_path)
    assert profiler.wanted((16, 64), PointKey("baseline", "coding", 64), tmp_path)


@pytest.mark.serial  # asked at a moment of a wall-clock window
def test_a_server_without_the_profiler_leaves_the_point_and_says_why(
        fake_sglang: dict[str, Any], tmp_path: Path) -> None:
    fake_sglang["routes"] = False
    live, said = LiveView(), []
    key = PointKey("eagle3", "coding", 16)
    url = fake_sglang["url"]
    with profiler.during_point((16,), key, _server(url), tmp_path, _spec(url, live, 0.6),
                               said.append):
        _window(live, fake_sglang, window_s=0.6)
    (profile,) = read_profiles(tmp_path)
    assert not profile.ranks
    assert profile.error is not None and "needs a real SGLang server" in profile.error
    assert "warning" in said[0] and "/start_profile (HTTP 404)" in said[0]


def test_profile_steps_refuses_the_simulated_engine_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="simulated server does not have"):
        build({"engine": "sim", "concurrency": [16, 64], "profile_steps": [16]})
    with pytest.raises(ConfigError, match="not a --concurrency level"):
        build({"engine": "sglang", "concurrency": [16, 64], "profile_steps": [16, 48]})
    assert build({"engine": "sglang", "concurrency": [16, 64],
                  "profile_steps": [64, 16]}).profile_steps == (16, 64)
    proc = run_cli(["sweep", "--profile-steps", "16", "--concurrency", "16,64",
                    "--results-dir", str(tmp_path)], tmp_path, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    error = proc.stderr.strip()
    assert len(error.splitlines()) == 1 and "--engine sglang" in error
    assert not any(tmp_path.iterdir())  # refused before any run directory


# -- explain --------------------------------------------------------------------------------------

def _plain_trace(path: Path) -> None:
    """A plain server's two decode steps on one rank, 7.5 ms each: 4.75 ms of GEMMs (one of
    them outside the decode spans), 1.5 ms of attention, 0.5 ms of norms, 0.75 ms idle."""
    events: list[dict[str, object]] = []
    for start in (0.0, 7500.0):
        events += [{"ph": "X", "cat": "gpu_user_annotation", "name": "step[DECODE bs=16]",
                    "ts": start, "dur": 6000},
                   kernel(start, 4000, "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTT"),
                   kernel(start + 4000, 1500, "BatchPrefillWithPagedKVCacheKernel<...>"),
                   kernel(start + 5500, 500, "FusedAddRMSNormKernel")]
    events.append(kernel(13_500, 1500, "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTT"))
    write_trace(path, events)


def test_explain_shows_the_profiled_split_beside_the_log_ratio(tmp_path: Path) -> None:
    """The committed one-step-log H100 run, with both servers' profiles at c = 16 added: the
    EAGLE-3 one on two ranks (the fixture), the plain one on one rank."""
    run_dir = tmp_path / "run"
    shutil.copytree(STEPS_RUN, run_dir)
    spec_dir = profile_dir(run_dir, "eagle3", "coding", 16)
    shutil.copytree(TWO_RANKS, spec_dir)
    plain_dir = profile_dir(run_dir, "baseline", "coding", 16)
    _plain_trace(plain_dir / "baseline-coding-c16-TP-0.trace.json.gz")
    # the EAGLE-3 server said it ran on 4 ranks: two traces are missing
    for folder, mode, speculative, expected in ((spec_dir, "eagle3", True, 4),
                                                (plain_dir, "baseline", False, 1)):
        ranks = split_point(folder, speculative=speculative, steps_requested=20)
        write_profile(folder, PointProfile(mode, "coding", 16, speculative, 20, ("CPU", "GPU"),
                                           ranks, ranks_expected=expected))
    write_profile(profile_dir(run_dir, "eagle3", "coding", 64),
                  PointProfile("eagle3", "coding", 64, True, 20, ("CPU", "GPU"),
                               error="no trace arrived"))
    (coding,) = explain_run(load_run(run_dir))
    by_level = {lv.concurrency: lv for lv in coding.profiles}
    assert sorted(by_level) == [16, 64]
    c16 = by_level[16]
    assert c16.plain is not None and c16.plain.step is not None
    assert c16.plain.step.step_ms == pytest.approx(7.5)
    assert c16.step_ratio == pytest.approx(9.3 / 7.5)
    assert c16.kernel_ratio == pytest.approx(6.2 / 6.75)
    log_ratio = next(lv.step_ratio for lv in coding.levels if lv.concurrency == 16)
    assert log_ratio is not None and c16.log_step_ratio == log_ratio
    assert any("no step profile of eagle3 at c=64: no trace arrived" in n for n in coding.notes)
    assert any("eagle3 at c=16 has 2 of its 4 ranks' traces" in n for n in coding.notes)
    assert not any("baseline at c=16" in n for n in coding.notes)

    console = Console(record=True, width=220)
    render_terminal([coding], console)
    out = console.export_text()
    assert "a step by kind of GPU time (SGLang's profiler)" in out
    # The kernels' ratio is the one set against the logs': rank 1's 6.2 ms of GPU time (3.1
    # idle) against the plain step's 6.75 (0.75 idle).
    kernels = 6.2 / 6.75
    assert (f"c=16: SGLang's profiler puts a speculative step's kernels at {kernels:.2f}x a "
            f"plain one's (6.20 against 6.75 ms of GPU time, the slowest of 2 and 1 rank(s)); "
            f"the logs give {log_ratio:.2f}, and the kernels' ratio is "
            f"{1 - kernels / log_ratio:.0%} below it. With host idle the profiled steps took "
            f"9.30 and 7.50 ms ({9.3 / 7.5:.2f}x)") in " ".join(out.split())
    assert "2 [9.10–9.30]" in out  # both ranks' steps beside the slowest's
    assert "sm100_mystery_epilogue 0.200 ms" in out
    blocks = why_blocks(explained(load_run(run_dir)))
    bullets = [item for b in blocks if isinstance(b, Bullets) for item in b.items]
    assert any("unknown kernels, eagle3 c=16" in str(item) for item in bullets)


# -- the committed H100 profiles ------------------------------------------------------------------

def test_the_committed_h100_profile_places_eagle3s_growth_in_its_attention_kernel() -> None:
    """What the H100 profile (GPU activity only, one rank) reads: EAGLE-3's attention kernel
    costs under 3 plain decodes' at 16 running and over 4 at 32-64, and it is most of the GPU
    time the EAGLE-3 iteration gains from 16 to 32."""
    run = GPU_RUNS / "h100-sglang-0.5.17-llama8b-shape-q0.3-flashinfer-coding-prof"
    rows = json.loads((run / "profile-steps.json").read_text())["rows"]
    ratio = {c: rows[f"eagle3-c{c}"]["attn_prefill"] / rows[f"baseline-c{c}"]["attn_prefill"]
             for c in (16, 32, 64, 128)}
    assert ratio[16] < 3 < 4 < min(ratio[32], ratio[64])

    def busy(row: dict[str, float]) -> float:
        return row["wall"] - row["idle"]

    gain = busy(rows["eagle3-c32"]) - busy(rows["eagle3-c16"])
    attn_gain = rows["eagle3-c32"]["attn_prefill"] - rows["eagle3-c16"]["attn_prefill"]
    assert attn_gain > 0.9 * gain
    # the lab's notes on the GPU runs quote each level's ratio as the profile gives it
    notes = (ROOT / "lab" / "notes" / "gpu-runs.md").read_text()
    assert all(f"| {ratio[c]:.2f} |" in notes for c in (16, 32, 64, 128))


def test_the_committed_zero_step_profile_reads_kv_a_little_more_than_a_decode() -> None:
    """Zero-step's one-token verify: 1.2-1.35 plain decodes' attention at every level, no jump
    from 16 to 32 running as EAGLE-3's verify has; the rest of its step over the plain server's
    is the host (idle)."""
    gpu = ROOT / "results" / "gpu"
    name = "h100-sglang-0.5.17-llama8b-shape-q0.3-flashinfer-coding-prof"
    plain = json.loads((gpu / name / "profile-steps.json").read_text())["rows"]
    zero = json.loads((gpu / f"{name}-zero-step" / "profile-steps.json").read_text())["rows"]
    for c in (16, 32, 64, 128):
        z, b = zero[f"zero-step-c{c}"], plain[f"baseline-c{c}"]
        assert 1.15 < z["attn_prefill"] / b["attn_prefill"] < 1.4
        assert z["idle"] - b["idle"] > 0.5 * (z["wall"] - b["wall"])
