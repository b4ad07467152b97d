"""The one argv builder: SGLang 0.5.23 flags for each server configuration.

The same list launches real SGLang and the simulator, so what the simulator is tested with is
exactly what a GPU run would get. Spelling facts (shared/reference/sglang-0.5.23.md):
- `--max-running-requests` is always explicit and equal across modes; SGLang silently sets 48
  for speculative servers otherwise.
- `--speculative-num-draft-tokens` is K+1 with topk 1 (SGLang forces it anyway).
- never `--cuda-graph-max-bs` (ambiguous prefix, exit 2); only `--cuda-graph-bs-decode`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from specbench import configurations
from specbench.config import ServerConfig
from specbench.configurations import ServerConfiguration
from specbench.results.store import atomic_write


def adaptive_config(num_steps: int, threshold: int) -> dict[str, Any]:
    """SGLang's adaptive JSON: K steps below batch size T, no drafting from T on.

    Single-candidate slots never move (the EMA policy has nothing to choose), so the switch is
    a pure batch-size threshold. With T == 1 every batch runs zero steps; K still has to appear
    in some slot (a "0" slot no batch reaches), or SGLang refuses the explicit
    `--speculative-num-steps K` as "not in the adaptive config candidate_steps".
    """
    if threshold <= 1:
        return {"0": {"candidate_steps": [num_steps]}, "1": {"candidate_steps": [0]}}
    return {"1": {"candidate_steps": [num_steps]}, str(threshold): {"candidate_steps": [0]}}


def write_adaptive_config(path: Path, num_steps: int, threshold: int) -> Path:
    return atomic_write(path, json.dumps(adaptive_config(num_steps, threshold), indent=2) + "\n")


def _configuration(config: ServerConfiguration | str) -> ServerConfiguration:
    return configurations.parse(config) if isinstance(config, str) else config


def build_argv(
    config: ServerConfiguration | str,
    server: ServerConfig,
    *,
    port: int,
    max_running_requests: int,
    adaptive_config_path: Path | None = None,
) -> list[str]:
    """SGLang flags (without the program) for one configuration (or its name)."""
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
    if server.tp_size != 1:
        argv += ["--tp-size", str(server.tp_size)]
    if server.cuda_graph_bs_decode:
        argv += ["--cuda-graph-bs-decode", *(str(b) for b in server.cuda_graph_bs_decode)]
    if spec.speculative:
        if not server.draft_model_path:
            raise ValueError(f"{spec.name} needs a draft model path")
        k = spec.num_steps(server.speculative_num_steps)
        argv += [
            "--speculative-algorithm",
            "EAGLE3",
            "--speculative-draft-model-path",
            server.draft_model_path,
            "--speculative-num-steps",
            str(k),
            "--speculative-eagle-topk",
            "1",
            "--speculative-num-draft-tokens",
            str(k + 1),
        ]
    if spec.kind == "dynamic":
        if adaptive_config_path is None:
            raise ValueError(f"{spec.name} needs an adaptive config file")
        argv += [
            "--speculative-adaptive",
            "--speculative-adaptive-config",
            str(adaptive_config_path),
        ]
    argv += list(server.extra_args)
    return argv


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
