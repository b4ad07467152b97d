"""SGLang 0.5.23's adaptive speculative decoding: the config file, the EMA slots, the router.

With ``--speculative-adaptive`` SGLang picks the number of draft steps per decode forward from
the batch size (a slot per batch-size range) and lets each slot move between its candidate
step counts on an EMA of accepted drafts. The simulator re-derives that policy here on its own
rather than sharing code with `specbench.engines`, so that a harness bug cannot hide behind a
shared mistake; tests/sim/test_scheduler_contract.py runs these classes against SGLang's own
`AdaptiveSpeculativeParams` and `AdaptiveStepSlot` and requires identical step counts.
"""

from __future__ import annotations

import bisect
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Required, TypedDict

ADAPTIVE_SLOT_DEFAULTS: dict[str, float] = {
    "ema_alpha": 0.2,
    "update_interval": 5,
    "warmup_batches": 10,
    "down_hysteresis": -0.25,
    "up_hysteresis": 0.0,
    "ceiling_coeff": 0.0,
}


class AdaptiveSlot(TypedDict, total=False):
    """One slot of SGLang's adaptive JSON; knobs it leaves out come from the file's top level,
    else from ADAPTIVE_SLOT_DEFAULTS."""

    candidate_steps: Required[list[int]]
    ema_alpha: float
    update_interval: int
    warmup_batches: int
    down_hysteresis: float
    up_hysteresis: float
    ceiling_coeff: float


# SGLang's built-in adaptive config, used by a bare --speculative-adaptive.
DEFAULT_ADAPTIVE_CONFIG: dict[str, AdaptiveSlot] = {
    "1": {"candidate_steps": [1, 3, 5, 7]},
    "8": {"candidate_steps": [0, 1, 3], "down_hysteresis": 0.0},
    "32": {"candidate_steps": [0, 1], "down_hysteresis": 0.0},
    "64": {"candidate_steps": [0]},
}


@dataclass(frozen=True)
class SlotConfig:
    """One batch-size slot of the adaptive config (key = smallest batch size it serves)."""

    key: int
    candidate_steps: tuple[int, ...]
    ema_alpha: float = 0.2
    update_interval: int = 5
    warmup_batches: int = 10
    down_hysteresis: float = -0.25
    up_hysteresis: float = 0.0
    ceiling_coeff: float = 0.0


# SGLang 0.5.14-0.5.19's built-in config differs only in slot 1 (read from their wheels).
DEFAULT_ADAPTIVE_CONFIG_0_5_17: dict[str, AdaptiveSlot] = {
    **DEFAULT_ADAPTIVE_CONFIG, "1": {"candidate_steps": [1, 3, 7]},
}


def load_adaptive_config(
    path: str | None, default: Mapping[str, AdaptiveSlot] | None = None
) -> tuple[SlotConfig, ...]:
    """Read SGLang's adaptive JSON: digit keys are slots; other top-level keys are defaults.

    Only `candidate_steps` is validated (non-empty list of ints >= 0), as in SGLang; anything
    wrong raises ValueError with SGLang-like wording. Without a path, `default` (the release's
    built-in config; 0.5.23's when None) is used.
    """
    if path is None:
        raw: Any = DEFAULT_ADAPTIVE_CONFIG if default is None else default
    else:
        try:
            raw = json.loads(Path(path).read_text())
        except FileNotFoundError:
            raise FileNotFoundError(f"[Errno 2] No such file or directory: {path!r}") from None
    if not isinstance(raw, dict):
        raise ValueError(
            f"Adaptive speculative config must be a JSON object, got {type(raw).__name__}"
        )
    defaults = {k: v for k, v in raw.items() if not str(k).isdigit()}
    slots = [_slot_config(key, entry, defaults) for key, entry in raw.items() if str(key).isdigit()]
    if not slots:
        raise ValueError(
            'Adaptive speculative config has no batch-size slot (digit keys such as "1")'
        )
    return tuple(sorted(slots, key=lambda s: s.key))


def _slot_config(key: str, entry: Any, defaults: Mapping[str, object]) -> SlotConfig:
    if not isinstance(entry, dict):
        raise ValueError(f"Adaptive config slot {key!r} must be an object with candidate_steps")
    merged = {**ADAPTIVE_SLOT_DEFAULTS, **defaults, **entry}
    steps = merged.get("candidate_steps")
    if (
        not isinstance(steps, list)
        or not steps
        or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in steps)
    ):
        raise ValueError(
            f"Adaptive config slot {key!r}: candidate_steps must be a non-empty list of "
            f"ints >= 0, got {steps!r}"
        )
    return SlotConfig(
        key=int(key),
        candidate_steps=tuple(sorted(set(steps))),
        ema_alpha=float(merged["ema_alpha"]),
        update_interval=max(1, int(merged["update_interval"])),
        warmup_batches=int(merged["warmup_batches"]),
        down_hysteresis=float(merged["down_hysteresis"]),
        up_hysteresis=float(merged["up_hysteresis"]),
        ceiling_coeff=float(merged["ceiling_coeff"]),
    )


@dataclass
class SlotState:
    """Runtime state of one adaptive slot, with SGLang 0.5.23's AdaptiveStepSlot policy.

    The EMA tracks accepted drafts per request (bonus token excluded) and only moves while
    drafting. After `warmup_batches` verifies, every `update_interval` verifies: step down
    while the EMA is at or below the previous candidate - 0.5 (0.5 when that candidate is 0)
    plus `down_hysteresis`; otherwise step up while it is above the current step - 0.5 plus
    `up_hysteresis`; from zero steps, always probe the next candidate.
    """

    config: SlotConfig
    current: int
    ema: float
    batch_count: int = 0

    @classmethod
    def start(cls, config: SlotConfig, initial_steps: int) -> SlotState:
        cands = config.candidate_steps
        current = initial_steps if initial_steps in cands else cands[len(cands) // 2]
        return cls(config, current, float(current - 1))

    def on_verify(self, mean_accepted: float) -> int | None:
        """Feed one verify's mean accepted drafts; return the new step count if it changes."""
        cfg = self.config
        if self.current > 0:
            self.ema = (1.0 - cfg.ema_alpha) * self.ema + cfg.ema_alpha * mean_accepted
        self.batch_count += 1
        if self.batch_count <= cfg.warmup_batches:
            return None
        if (self.batch_count - cfg.warmup_batches) % cfg.update_interval != 0:
            return None
        new = self._target()
        if new == self.current:
            return None
        self.current = new
        return new

    def _target(self) -> int:
        cfg, cands = self.config, self.config.candidate_steps
        old_idx = idx = cands.index(self.current)
        if self.current == 0:
            idx = min(idx + 1, len(cands) - 1)
            if cands[idx] > 0 and self.ema < 0:
                self.ema = float(cands[idx] - 1)  # no acceptance history yet: neutral start
            return cands[idx]
        while idx > 0:
            prev = cands[idx - 1]
            if self.ema <= (0.5 if prev == 0 else prev - 0.5) + cfg.down_hysteresis:
                idx -= 1
            else:
                break
        if idx == old_idx:
            while idx < len(cands) - 1 and self.ema > cands[idx] - 0.5 + cfg.up_hysteresis:
                idx += 1
        target = cands[idx]
        if cfg.ceiling_coeff > 0:
            # The ceiling only caps a hold or a step down, never a step up.
            ceiling = max(1, math.ceil(self.ema * cfg.ceiling_coeff))
            if ceiling < target <= self.current:
                while idx > 0 and cands[idx] > ceiling:
                    idx -= 1
                target = cands[idx]
        return target


class AdaptiveRouter:
    """Batch size -> step count, as SGLang 0.5.23's AdaptiveSpeculativeParams._route."""

    def __init__(
        self,
        slots: tuple[SlotConfig, ...],
        cuda_graph_bs: tuple[int, ...] | None,
        initial_steps: int,
    ) -> None:
        self.keys = [s.key for s in slots]
        self.graph_bs = sorted(cuda_graph_bs) if cuda_graph_bs else []
        self.states = [SlotState.start(slot, initial_steps) for slot in slots]

    def padded(self, batch_size: int) -> int:
        """The CUDA graph batch size a batch runs at (the smallest listed one that fits)."""
        if self.graph_bs:
            i = bisect.bisect_left(self.graph_bs, batch_size)
            if i < len(self.graph_bs):
                return self.graph_bs[i]
        return batch_size

    def route(self, batch_size: int) -> SlotState:
        i = bisect.bisect_right(self.keys, self.padded(batch_size)) - 1
        return self.states[max(i, 0)]

    def steps_for(self, batch_size: int) -> int:
        return self.route(batch_size).current
