"""Before any server starts: the prompt sets loaded (and mixed or bucketed as asked), and what
is certain to fail refused in one line (ConfigError), so a sweep never launches a server it
cannot measure."""

from __future__ import annotations

from specbench import prompts
from specbench.config import SweepConfig
from specbench.engines import Engine
from specbench.errors import ConfigError
from specbench.load import protocols, runner
from specbench.prompts import context


def preflight(cfg: SweepConfig, engine: Engine) -> dict[str, prompts.PromptSet]:
    """Load the prompt sets and refuse what is certain to fail; raise ConfigError."""
    sets: dict[str, prompts.PromptSet] = {}
    for name in cfg.prompt_sets:
        try:
            ps = prompts.load_prompt_set(name)
        except prompts.PromptSetError as exc:
            raise ConfigError(str(exc)) from None
        if ps.name in sets:
            raise ConfigError(f"two prompt sets are named {ps.name!r}; rename one of the files")
        sets[ps.name] = ps  # a file path is keyed by its stem, the name results use
        try:
            protocols.check_sampling(ps.requests)
        except protocols.SamplingOverrideError as exc:
            raise ConfigError(f"prompt set {ps.name}: {exc}") from None
    if cfg.mix:
        sets[prompts.MIX_NAME] = _mix(cfg, sets)
    if cfg.context_lengths:
        try:
            sets = context.bucketed_sets(sets, cfg.context_lengths)
        except prompts.PromptSetError as exc:
            raise ConfigError(str(exc)) from None
    # One socket per user: the soft open-files limit is raised to the hard one now, and a
    # limit too low for the largest level is refused before any server starts.
    runner.raise_fd_limit(max(cfg.concurrency))
    engine.preflight()
    return sets


def _mix(cfg: SweepConfig, sets: dict[str, prompts.PromptSet]) -> prompts.PromptSet:
    assert cfg.mix is not None
    if prompts.MIX_NAME in sets:
        raise ConfigError("a prompt set is named mix, which --mix uses; rename that file")
    parts = {}
    for name in cfg.mix:
        try:
            parts[name] = sets[name] if name in sets else prompts.load_prompt_set(name)
        except prompts.PromptSetError as exc:
            raise ConfigError(f"--mix: {exc}") from None
    return prompts.mix_prompt_set(parts, dict(cfg.mix), cfg.load.seed)
