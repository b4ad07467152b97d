"""One agent session being written: messages, the target index of each assistant step, its cap."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any

from tools.promptgen.agentic.workspace import Workspace
from tools.promptgen.model import call_id

_THOUGHTS = {
    "start": ("Let me start by reproducing the failure.", "I'll run the failing test first.",
              "First, let me see the current state of the tests.", ""),
    "read": ("Let me look at the implementation and the test.", "Reading the relevant files.",
             "", ""),
    "fix": ("Found it: the change below restores the intended behaviour.",
            "The logic here is wrong; fixing it.", "", ""),
    "verify": ("Now re-running the tests.", "Let me confirm the fix with the full suite.", ""),
    "explore": ("Let me get an overview of the repository first.",
                "I'll look around the codebase.", ""),
}


class Session:
    """Builds one agent session: messages, the target index of every assistant step and its cap."""

    def __init__(self, rng: random.Random, ws: Workspace) -> None:
        self.rng = rng
        self.ws = ws
        self.messages: list[dict[str, Any]] = []
        self.targets: list[int] = []
        self.caps: list[int] = []
        self.used: list[str] = []

    def user(self, text: str) -> None:
        self.messages.append({"role": "user", "content": text})

    def thought(self, kind: str) -> str:
        return self.rng.choice(_THOUGHTS[kind])

    def step(self, calls: Sequence[tuple[str, dict[str, Any]] | tuple[str, dict[str, Any], str]],
             thought: str = "") -> list[str]:
        """One assistant turn with one or more (parallel) tool calls, then their results."""
        self.targets.append(len(self.messages))
        tool_calls: list[dict[str, Any]] = []
        outputs: list[str] = []
        for call in calls:
            name, args = call[0], call[1]
            output = call[2] if len(call) == 3 else self.ws.run(name, args)
            tool_calls.append({"id": call_id(self.rng), "type": "function",
                               "function": {"name": name, "arguments": json.dumps(args)}})
            outputs.append(output)
            if name not in self.used:
                self.used.append(name)
        size = len(thought) + sum(len(c["function"]["arguments"]) + 40 for c in tool_calls)
        # The smallest cap that leaves 50% headroom over the step (about 3.5 characters a token).
        self.caps.append(next(c for c in (128, 256, 512, 1024)
                              if c >= size / 3.5 * 1.5 or c == 1024))
        self.messages.append({"role": "assistant", "content": thought, "tool_calls": tool_calls})
        for tc, out in zip(tool_calls, outputs, strict=True):
            self.messages.append({"role": "tool", "tool_call_id": tc["id"], "content": out})
        return outputs

    def answer(self, text: str) -> None:
        self.targets.append(len(self.messages))
        self.caps.append(256 if len(text) < 500 else 512)
        self.messages.append({"role": "assistant", "content": text})
