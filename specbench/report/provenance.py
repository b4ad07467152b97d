"""What a run measured, in one sentence: the hardware, SGLang and its attention backend (the
one SGLang resolved when none was given, with TP, CUDA graphs and overlap scheduling from the
servers' /server_info), or the simulator's profile.

The attention backend moves the answer more than anything else a user does not see: the same
8B pair on the same H200 crossed over at c* = 6.3 with Triton attention and at 18 with
FlashInfer (lab/notes/gpu-runs.md). A report that does not name it is not an answer.
"""

from __future__ import annotations

from typing import Any

from specbench import configurations
from specbench.engines.argv import flag_value
from specbench.results import Run


def attention_backend(run: Run) -> str | None:
    """The attention backend the run's servers were launched with, or None if not named."""
    for server in run.manifest.servers.values():
        backend = flag_value(server.argv, "--attention-backend")
        if backend:
            return backend
    return flag_value(run.manifest.config.server.extra_args, "--attention-backend")


def _resolved(run: Run, key: str) -> Any:
    """What the first server whose /server_info gave `key` resolved it to (manifest)."""
    for server in run.manifest.servers.values():
        value = server.server_info.get(key)
        if value is not None:
            return value
    return None


def resolved_settings(run: Run) -> str | None:
    """The settings the servers resolved that the command line need not show, in words: TP,
    decode CUDA graphs, overlap scheduling, EAGLE-3's topk and draft tokens; None when the
    manifest kept none (runs recorded before these keys were kept)."""
    parts = []
    tp = _resolved(run, "tp_size")
    if tp is not None:
        parts.append(f"TP {tp}")
    sizes, largest = _resolved(run, "cuda_graph_bs"), _resolved(run, "cuda_graph_max_bs")
    if sizes == [] or _resolved(run, "disable_cuda_graph") is True:
        parts.append("no decode CUDA graphs")
    elif isinstance(sizes, list) and sizes:
        parts.append(f"decode CUDA graphs at {len(sizes)} batch sizes up to {max(sizes)}")
    elif largest:
        parts.append(f"decode CUDA graphs up to batch {largest}")
    overlap = _resolved(run, "disable_overlap_schedule")
    if overlap is not None:
        parts.append("overlap scheduling " + ("off" if overlap else "on"))
    topk = _resolved(run, "speculative_eagle_topk")
    tokens = _resolved(run, "speculative_num_draft_tokens")
    if topk is not None and tokens is not None:
        parts.append(f"EAGLE-3 topk {topk} with {tokens} draft tokens")
    return ", ".join(parts) if parts else None


def draft_configurations(run: Run) -> str | None:
    """Which draft configuration the decisions hold for, where the run measured a tree too:
    the `eagle3` chain (c* and T are read from its curve, and every dynamic server drafts a
    chain), each tree beside it; None for a run of chains only."""
    config = run.manifest.config
    k = config.server.speculative_num_steps
    specs = [c for c in config.configurations if c.kind == "eagle3"]
    trees = [c for c in specs if c.tree]
    if not trees:
        return None
    shapes = "; ".join(f"{c.name}, {c.draft_words(k)}" for c in trees)
    chain = configurations.parse("eagle3").draft_words(k)
    held = (f"The decisions hold for the eagle3 server's draft, {chain}"
            if "eagle3" in config.modes else
            f"The decisions are read from the eagle3 server's draft, {chain}, not measured here")
    return (f"Drafts measured as static trees: {shapes}. {held}; every dynamic server drafts "
            "that chain too: SGLang's --speculative-adaptive takes topk 1 only (with a tree it "
            "falls back to static drafting), so no threshold holds for a tree.")


def measured_on(run: Run) -> str:
    """Where the run's numbers come from, in one sentence; a second says which draft the
    decisions hold for where trees were measured too."""
    where = _measured_on(run)
    drafts = draft_configurations(run)
    return f"{where} {drafts}" if drafts else where


def _stand_in(prefill_overhead_ms: float) -> str:
    """The profile term no one-step log shows, named where it moves the numbers."""
    if prefill_overhead_ms <= 0:
        return ""
    return (f" Each simulated prefill forward carries {prefill_overhead_ms:g} ms that SGLang's "
            "one-step decode logs do not show: it stands in for the tokenizer process's cost "
            "under load, so outputs that end at different times (a prefill forward for nearly "
            "every arrival) pay it more often than outputs that end together, which therefore "
            "read faster (the `lockstep_ends` flag marks them).")


def _measured_on(run: Run) -> str:
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
                f"({profile.description}).{truth}{_stand_in(profile.overheads.o_prefill_ms)}")
    gpus = run.manifest.fingerprint.get("gpus") or []
    names = sorted({str(g.get("name")) for g in gpus if isinstance(g, dict) and g.get("name")})
    hardware = f"{len(gpus)}x {', '.join(names)}" if names else "GPUs not recorded"
    version = run.manifest.engine.version or "unknown version"
    backend = attention_backend(run)
    chosen = _resolved(run, "attention_backend")
    if backend:
        attention = f"{backend} attention"
    elif chosen:  # SGLang picked it: the server's /server_info said which
        attention = f"{chosen} attention (SGLang's default here; no --attention-backend given)"
    else:
        attention = "SGLang's default attention backend (no --attention-backend given)"
    settings = resolved_settings(run)
    attention += f"; the servers resolved {settings}" if settings else ""
    skip = ""
    if config.server.skip_zero_step_draft_extend and any(
            c.kind == "dynamic" for c in config.configurations):
        skip = (" Steps 0 ran without the draft model's extend (--skip-zero-step-draft-extend: "
                "SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND=1).")
    return f"Measured on {hardware}, SGLang {version}, {attention}.{skip}"
