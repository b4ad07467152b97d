"""What a run measured, in one sentence: the hardware, SGLang and its attention backend, or the
simulator's profile.

The attention backend moves the answer more than anything else a user does not see: the same
8B pair on the same H200 crossed over at c* = 6.3 with Triton attention and at 18 with
FlashInfer (results/gpu/README.md). A report that does not name it is not an answer.
"""

from __future__ import annotations

from specbench.engines.argv import flag_value
from specbench.results import Run


def attention_backend(run: Run) -> str | None:
    """The attention backend the run's servers were launched with, or None if not named."""
    for server in run.manifest.servers.values():
        backend = flag_value(server.argv, "--attention-backend")
        if backend:
            return backend
    return flag_value(run.manifest.config.server.extra_args, "--attention-backend")


def measured_on(run: Run) -> str:
    """One sentence: where the run's numbers come from."""
    config = run.manifest.config
    if config.engine == "sim":
        from specbench.sim.profile import load_profile  # only a simulated run needs it

        name = config.sim.profile
        try:
            profile = load_profile(name)
        except Exception:  # a profile renamed or removed since: the name still says it
            return f"Measured on the simulated SGLang server with profile {name}."
        truth = f" {profile.ground_truth}" if profile.ground_truth else ""
        return (f"Measured on the simulated SGLang server with profile {name} "
                f"({profile.description}).{truth}")
    gpus = run.manifest.fingerprint.get("gpus") or []
    names = sorted({str(g.get("name")) for g in gpus if isinstance(g, dict) and g.get("name")})
    hardware = f"{len(gpus)}x {', '.join(names)}" if names else "GPUs not recorded"
    version = run.manifest.engine.version or "unknown version"
    backend = attention_backend(run)
    attention = (f"{backend} attention" if backend
                 else "SGLang's default attention backend (no --attention-backend given)")
    skip = ""
    if config.server.skip_zero_step_draft_extend and any(
            c.kind == "dynamic" for c in config.configurations):
        skip = (" Steps 0 ran without the draft model's extend (--skip-zero-step-draft-extend: "
                "SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND=1).")
    return f"Measured on {hardware}, SGLang {version}, {attention}.{skip}"
