"""The servers' section: what every launched server gets, equal across configurations."""

from __future__ import annotations

from specbench.config_schema.fields import Section, option, secret


class ServerConfig(Section):
    """What every launched server gets; equal across configurations so the comparison is fair."""

    model_path: str = option(
        "meta-llama/Llama-3.1-8B-Instruct", "target model (SGLang --model-path)", cli="--model-path"
    )
    draft_model_path: str | None = option(
        "jamesliu1/sglang-EAGLE3-Llama-3.1-Instruct-8B",
        "EAGLE-3 draft model",
        cli="--draft-model-path",
    )
    tp_size: int = option(1, "tensor parallel size", cli="--tp-size", ge=1)
    # None means "the largest concurrency in the sweep"; always passed explicitly because
    # SGLang silently caps speculative servers at 48 otherwise.
    max_running_requests: int | None = option(
        None,
        "server limit, equal for all servers",
        cli="--max-running-requests",
        help_default="largest concurrency",
        ge=1,
    )
    speculative_num_steps: int = option(
        3, "EAGLE-3 draft steps K (topk 1, K+1 draft tokens)", cli="--spec-steps", ge=1
    )
    host: str = option("127.0.0.1", "server bind address", cli="--host")
    port: int = option(30000, "server port", cli="--port", ge=1, le=65535)
    extra_args: tuple[str, ...] = option(
        (), "extra SGLang flag(s), repeatable", cli="--server-arg", parse="shlex_each"
    )
    server_command: tuple[str, ...] = option(
        ("python", "-m", "sglang.launch_server"),
        "SGLang launcher, e.g. 'sglang serve'",
        cli="--server-command",
        parse="shlex",
    )
    # SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND=1 for the dynamic server: cheaper steps above the
    # threshold, but a cold draft (lower acceptance) right after speculation resumes.
    skip_zero_step_draft_extend: bool = option(
        False,
        "dynamic server: SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND=1",
        cli="--skip-zero-step-draft-extend",
    )
    cuda_graph_bs_decode: tuple[int, ...] | None = option(
        None,
        "comma list passed as --cuda-graph-bs-decode",
        cli="--cuda-graph-bs-decode",
        parse="csv_int",
    )
    admin_api_key: str | None = secret(
        "admin key for /flush_cache (SGLang --admin-api-key)",
        "--admin-api-key",
        "SPECBENCH_ADMIN_API_KEY",
    )
    ready_timeout_s: float = option(1800.0, "seconds a server may take to become ready", gt=0)
    stop_grace_s: float = option(10.0, "seconds between SIGTERM and SIGKILL", ge=0)
