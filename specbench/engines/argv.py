"""The one argv builder: SGLang 0.5.23 flags for each server configuration.

The same list launches real SGLang and the simulator, so what the simulator is tested with is
exactly what a GPU run would get. Spelling facts (SGLang 0.5.23's server arguments):
- `--max-running-requests` is always explicit and equal across modes; SGLang silently sets 48
  for speculative servers otherwise.
- `--speculative-num-draft-tokens` is K+1 with topk 1 (SGLang forces it anyway); a tree
  configuration (`eagle3-k<K>-t<TOPK>-d<N>`) passes its topk and N.
- the draft's shape is the mode name's: `--speculative-eagle-topk` or
  `--speculative-num-draft-tokens` in `--server-arg` would override it after the fact (and
  turn an adaptive server static), so :func:`check_draft_flags` refuses them.
- never `--cuda-graph-max-bs` (ambiguous prefix, exit 2); only `--cuda-graph-bs-decode`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from specbench import configurations
from specbench.config import ServerConfig
from specbench.configurations import Schedule, ServerConfiguration
from specbench.engines import versions
from specbench.errors import ConfigError
from specbench.results.store import atomic_write

# SGLang sizes the KV pool (--mem-fraction-static) to leave about 13.5 GiB of a GPU for
# activations and the CUDA graphs of one K: 0.83 of an H100's 79.2 GiB, 0.903 of an H200's
# 139.8 GiB (results/gpu/ server logs). An adaptive server also captures graphs and buffers for
# every other candidate K, 0 included, which that share does not count: 2.4-3.3 GB each at 128
# graph rows for the constructed 8B pair on an H100. The headroom held one more candidate (the
# dynamic server, K and 0, started on both cards); SGLang 0.5.17's default adaptive server
# (candidates 0, 1, 3, 7) ran out of memory capturing its third (lab/notes/gpu-runs.md).
SGLANG_RESERVE_GIB = 13.5
CANDIDATE_GRAPHS_GIB_PER_128_ROWS = 3.5


def adaptive_config(num_steps: int, threshold: int) -> dict[str, Any]:
    """SGLang's adaptive JSON for K steps below batch size T and none from T on."""
    return Schedule.from_threshold(num_steps, threshold).to_json()


def write_adaptive_config(path: Path, schedule: Schedule, context: str | None = None) -> Path:
    """SGLang's adaptive JSON; `context` (which traffic it holds for) goes under a key that is
    not a batch size, which SGLang's loader skips (0.5.17 and 0.5.23 read digit keys only)."""
    body: dict[str, object] = dict(schedule.to_json())
    if context is not None:
        body["context"] = context
    return atomic_write(path, json.dumps(body, indent=2) + "\n")


def _configuration(config: ServerConfiguration | str) -> ServerConfiguration:
    return configurations.parse(config) if isinstance(config, str) else config


def launch_steps(
    config: ServerConfiguration | str, server: ServerConfig, schedule: Schedule | None = None
) -> int:
    """The --speculative-num-steps a configuration launches at: its schedule's largest K, SGLang's
    default schedule at the largest of SGLang's built-in candidates
    (configurations.SGLANG_DEFAULT_LAUNCH_STEPS says why), else its own K."""
    spec = _configuration(config)
    if spec.adaptive == "default":
        return configurations.SGLANG_DEFAULT_LAUNCH_STEPS
    if schedule is not None:
        return schedule.launch_steps
    return spec.num_steps(server.speculative_num_steps)


def adaptive_candidates(
    config: ServerConfiguration | str, schedule: Schedule | None, version: str | None
) -> set[int]:
    """The step counts an adaptive server builds graphs for: its schedule's, or SGLang's built-in
    slots' (slot 1 by release, then [0, 1, 3], [0, 1] and [0]); empty for a static server."""
    spec = _configuration(config)
    if spec.kind != "dynamic":
        return set()
    if spec.adaptive == "default":
        return set(versions.release(version).default_slot1_steps) | set(
            versions.DEFAULT_UPPER_SLOTS_STEPS)
    if schedule is None:
        return set()
    return {steps for _, steps in schedule.slots}


def graph_headroom_fraction(
    candidates: int, gpu_memory_mib: int, graph_rows: int
) -> float | None:
    """A --mem-fraction-static that leaves SGLang's own reserve plus the graphs of each candidate
    beyond the second; None where two candidates fit SGLang's own headroom, or where the pool
    would keep under a third of the GPU (then SGLang's own diagnosis names the fix)."""
    if candidates <= 2 or gpu_memory_mib <= 0:
        return None
    extra_gib = (candidates - 2) * CANDIDATE_GRAPHS_GIB_PER_128_ROWS * max(graph_rows, 32) / 128
    fraction = 1 - (SGLANG_RESERVE_GIB + extra_gib) * 1024 / gpu_memory_mib
    return round(fraction, 3) if fraction >= 1 / 3 else None


def build_argv(
    config: ServerConfiguration | str,
    server: ServerConfig,
    *,
    port: int,
    max_running_requests: int,
    adaptive_config_path: Path | None = None,
    schedule: Schedule | None = None,
    gpu_memory_mib: int | None = None,
    version: str | None = None,
) -> list[str]:
    """SGLang flags (without the program) for one configuration (or its name).

    A speculative server launches at `launch_steps`. An adaptive one on a GPU of
    `gpu_memory_mib` (the smallest it uses; None: unknown) gets a --mem-fraction-static that
    leaves room for its candidates' graphs, unless the user passed one.
    """
    spec = _configuration(config)
    argv = [
        "--model-path",
        server.model_path,
        "--host",
        server.host,
        "--port",
        str(port),
        "--max-running-requests",
        str(max_running_requests),
        "--enable-metrics",
    ]
    if flag_value(server.extra_args, "--decode-log-interval") is None:
        # A decode log line per step: `specbench explain` reads each step's time from them
        # (SGLang's default, 40, folds the prefills of a loaded server into most lines).
        argv += ["--decode-log-interval", "1"]
    if server.tp_size != 1:
        argv += ["--tp-size", str(server.tp_size)]
    if server.cuda_graph_bs_decode:
        argv += ["--cuda-graph-bs-decode", *(str(b) for b in server.cuda_graph_bs_decode)]
    if spec.speculative:
        if not server.draft_model_path:
            raise ValueError(f"{spec.name} needs a draft model path")
        argv += [
            "--speculative-algorithm",
            "EAGLE3",
            "--speculative-draft-model-path",
            server.draft_model_path,
        ]
        check_draft_flags([spec], server)
        k = launch_steps(spec, server, schedule)
        # An adaptive server drafts a chain (SGLang takes topk 1 only there): K + 1 tokens.
        draft_tokens = spec.draft_tokens if spec.tree else k + 1
        argv += [
            "--speculative-num-steps",
            str(k),
            "--speculative-eagle-topk",
            str(spec.topk),
            "--speculative-num-draft-tokens",
            str(draft_tokens),
        ]
    if spec.kind == "dynamic":
        argv.append("--speculative-adaptive")
        if spec.adaptive != "default":
            if adaptive_config_path is None:
                raise ValueError(f"{spec.name} needs an adaptive config file")
            argv += ["--speculative-adaptive-config", str(adaptive_config_path)]
    if gpu_memory_mib and flag_value(server.extra_args, "--mem-fraction-static") is None:
        graph_rows = max(server.cuda_graph_bs_decode or (max_running_requests,))
        candidates = len(adaptive_candidates(spec, schedule, version))
        fraction = graph_headroom_fraction(candidates, gpu_memory_mib, graph_rows)
        if fraction is not None:
            argv += ["--mem-fraction-static", str(fraction)]
    argv += list(server.extra_args)
    return argv


def check_draft_flags(
    configs: Sequence[ServerConfiguration | str], server: ServerConfig
) -> None:
    """Refuse (ConfigError, one line) a draft shape in --server-arg that would override what
    the configurations' names say; for an adaptive server, say why SGLang cannot take it.

    SGLang 0.5.23 turns `--speculative-adaptive` off when topk != 1 (a warning, then static
    drafting at the launch's K), so a dynamic server given a tree would measure a static one.
    A chain's draft-token count is harmless there: SGLang forces K + 1 for topk 1.
    """
    specs = [c for c in map(_configuration, configs) if c.speculative]
    topk_text = flag_value(server.extra_args, "--speculative-eagle-topk")
    tokens_text = flag_value(server.extra_args, "--speculative-num-draft-tokens")
    topk, tokens = _int_or_none(topk_text), _int_or_none(tokens_text)
    adaptive = [c.name for c in specs if c.kind == "dynamic"]
    if topk is not None and topk != 1 and adaptive:
        raise ConfigError(
            f"--server-arg --speculative-eagle-topk {topk}: SGLang's --speculative-adaptive "
            f"drafts a chain only (topk 1) and falls back to static drafting for a tree, so "
            f"{', '.join(adaptive)} would not switch; drop it from --server-arg and measure the "
            "tree as a static server by name (e.g. --modes eagle3-k3-t4-d8)"
        )
    overridden = [c.name for c in specs
                  if (topk is not None and topk != c.topk)
                  or (tokens is not None and c.tree and tokens != c.draft_tokens)]
    if overridden:
        given = " ".join(f"{flag} {value}" for flag, value in (
            ("--speculative-eagle-topk", topk_text),
            ("--speculative-num-draft-tokens", tokens_text)) if value is not None)
        raise ConfigError(
            f"--server-arg {given} would override the draft shape that the name of "
            f"{', '.join(overridden)} sets; drop it from --server-arg and name the shape as a "
            "mode (eagle3-k<K> for a chain, eagle3-k<K>-t<TOPK>-d<N> for a tree, e.g. "
            "eagle3-k3-t4-d8)"
        )


def _int_or_none(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None  # SGLang's own parser refuses it, in its words


def server_env(config: ServerConfiguration | str, server: ServerConfig) -> dict[str, str]:
    """Extra environment for one configuration's server process (recorded in the manifest).

    In SGLang 0.5.23 a zero-step batch is not a plain decode: it runs the target's verify path
    with a one-token tree and, by default, a draft-model extend on every step so the draft's KV
    cache stays warm. `SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND=1` (dynamic servers only) skips
    that extend: cheaper steps above T, but a cold draft (lower acceptance) right after
    speculation resumes. Leave it off when load crosses T often; turn it on for long stretches
    above T.
    """
    env: dict[str, str] = {}
    if _configuration(config).kind == "dynamic" and server.skip_zero_step_draft_extend:
        env["SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND"] = "1"
    return env


def flag_value(argv: Sequence[str], flag: str) -> str | None:
    """The value of `flag` in an argv (`--flag V` or `--flag=V`; the last one wins)."""
    value = None
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith(flag + "="):
            value = arg[len(flag) + 1 :]
    return value
