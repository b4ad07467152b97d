"""The scripted generations, the requests that play them, and how a captured stream is read.

A :class:`Case` is a generation written step by step, the way SGLang's scheduler commits it:
the first step is the prefill's one token, every later step one decode step (one verify round
on a speculative server), ``<eos>`` the model's EOS token. The stand-in scheduler plays the
case whose name is a word of the prompt. :func:`request_for` is the same specbench
``PromptRequest`` for SGLang and the simulator; only SGLang plays the script, the simulator
makes up its own tokens, so the simulator is compared on the stream's *shape*: chunk kinds
in order (:func:`kinds`), the keys of each kind (:func:`keys_by_kind`), where usage sits and
how far the final count is above the last streamed one (:func:`usage_placement`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from specbench.prompts import PromptRequest

EOS = "<eos>"
MODEL = "oracle"
# Protocol names (specbench.load.protocols.PROTOCOLS) and their short names in test ids.
ROUTES = {"chat": "openai-chat", "completions": "openai-completions", "generate": "sglang-native"}
MODES = ("baseline", "eagle3")
# Far above any natural length the simulator draws (16 x its output mean + 1), so that every
# EOS case ends on EOS there too.
EOS_CAP = 8192
# meta_info keys SGLang adds with --enable-metrics (specbench always passes it): time stamps
# set by the scheduler and the TokenizerManager. Which ones appear depends on the scheduler's
# stamps, which the stand-in only approximates, and specbench reads none, so shapes leave them
# out.
TIMING_KEYS = frozenset({
    "queue_time", "forward_entry_time", "prefill_finished_time", "storage_prefetch_wait",
    "storage_staging_wait", "request_received_ts", "first_token_latency",
    "api_server_dispatch_finish_ts", "response_sent_to_client_ts", "request_finished_ts",
    "decode_throughput", "e2e_latency",
})


@dataclass(frozen=True)
class Case:
    name: str  # a single word: the prompt names the script by it
    what: str
    steps: tuple[tuple[str, ...], ...]
    max_tokens: int = EOS_CAP
    sampling: dict[str, Any] | None = field(default=None, hash=False)
    modes: tuple[str, ...] = MODES
    sim: bool = True  # whether the simulator can make a generation of this kind

    def _run(self) -> tuple[int, str, list[int]]:
        """(completion tokens, finish reason, the count after each forward before the last) as
        SGLang's finish logic has them."""
        n, counts = 0, []
        for index, step in enumerate(self.steps):
            # The stand-in splits a first step of several tokens into the prefill's token and
            # one decode step with the rest.
            parts = [step[:1], step[1:]] if index == 0 and len(step) > 1 else [step]
            for part in parts:
                if n > 0:
                    counts.append(n)
                for word in part:
                    n += 1
                    # EOS beats the length cap in the same step (Req.update_finish_state).
                    if word == EOS and not (self.sampling or {}).get("ignore_eos"):
                        if n > self.max_tokens:  # _cap_finished_len_at_max_new_tokens
                            return self.max_tokens, "length", counts
                        return n, "stop", counts
                if n >= self.max_tokens:
                    return self.max_tokens, "length", counts
        raise AssertionError(f"script {self.name} ends before it finishes")

    @property
    def completion_tokens(self) -> int:
        return self._run()[0]

    @property
    def finish_reason(self) -> str:
        return self._run()[1]

    @property
    def counts_before_the_last_step(self) -> list[int]:
        """The completion count after each forward but the last: each is streamed in a chunk
        of its own unless the server merged that step's output into the next one."""
        return self._run()[2]

    def spec_verify_ct(self, mode: str) -> int | None:
        """What the stream reports: SGLang sends spec fields only when a verify round ran."""
        steps = len(self._run()[2])
        return steps if mode != "baseline" and steps > 0 else None


CASES: tuple[Case, ...] = (
    Case("onestep", "one token per step, ending on EOS",
         (("def",), ("sort",), ("xs",), ("return",), (EOS,))),
    Case("multistep", "several tokens per step (speculative), the last step only EOS",
         (("def",), ("sort", "xs", "colon"), ("return", "sorted"), (EOS,)), modes=("eagle3",)),
    Case("multitail", "several tokens per step, EOS committed with text",
         (("def",), ("sort", "xs", "colon"), ("return", EOS)), modes=("eagle3",)),
    Case("length", "one token per step, ending on the length cap",
         (("def",), ("sort",), ("xs",), ("return",), (EOS,)), max_tokens=3,
         sampling={"ignore_eos": True}),
    Case("speclength", "several tokens per step, the cap falling inside a step",
         (("def",), ("sort", "xs", "colon"), ("return", "sorted", "xs"), ("done", EOS)),
         max_tokens=6, sampling={"ignore_eos": True}, modes=("eagle3",)),
    Case("eosonly", "a one-token answer: EOS straight from the prefill", ((EOS,),), sim=False),
    Case("oneword", "a one-token answer: one word, max_tokens 1", (("done",), (EOS,)),
         max_tokens=1),
)
CASE_BY_NAME = {case.name: case for case in CASES}


def request_for(case: Case) -> PromptRequest:
    return PromptRequest(
        id=f"oracle/{case.name}", prompt_set="oracle", category="oracle",
        messages=({"role": "user", "content": f"run {case.name}"},),
        max_tokens=case.max_tokens, sampling=case.sampling,
    )


def params(*, sim: bool = False) -> list[tuple[str, str, str]]:
    """(mode, route, case) for every stream captured (with `sim`: that the simulator makes)."""
    return [(mode, route, case.name) for case in CASES for mode in case.modes
            for route in ROUTES if case.sim or not sim]


@dataclass(frozen=True)
class Capture:
    """One response as the client read it: status, the raw reads and their monotonic times."""

    status: int
    reads: tuple[bytes, ...]
    times: tuple[float, ...]

    @property
    def raw(self) -> bytes:
        return b"".join(self.reads)

    def events(self) -> list[Any]:
        """Every SSE event in order: the JSON object, or the string ``[DONE]``."""
        out: list[Any] = []
        for block in self.raw.decode().split("\n\n"):
            if not block.strip():
                continue
            assert block.startswith("data: "), f"not an SSE data event: {block!r}"
            payload = block[len("data: "):]
            out.append(payload if payload == "[DONE]" else json.loads(payload))
        return out


def one_read_per_event(events: Iterable[Any]) -> tuple[list[bytes], list[float]]:
    """Events re-serialised one per read, at times 0, 1, 2, ... (for altered streams)."""
    reads = [b"data: " + (e.encode() if isinstance(e, str) else json.dumps(e).encode()) + b"\n\n"
             for e in events]
    return reads, [float(i) for i in range(len(reads))]


def kind(route: str, event: Any) -> str:
    """What an event is: role, content, finish, content+finish, sglext, usage, update, final,
    done."""
    if event == "[DONE]":
        return "done"
    if route == "generate":
        return "final" if event["meta_info"].get("finish_reason") else "update"
    choices = event["choices"]
    if not choices:
        return "sglext" if "sglext" in event else "usage"
    choice = choices[0]
    if route == "chat":
        delta = choice.get("delta") or {}
        if "role" in delta:
            return "role"
        text = delta.get("content") or delta.get("tool_calls")
    else:
        text = choice.get("text")
    if choice.get("finish_reason") is not None:
        return "content+finish" if text else "finish"
    return "content" if text else "empty"


def key_paths(obj: Any, prefix: str = "") -> frozenset[str]:
    """Every key path of a JSON object, null values marked ``=null`` (lists of objects as
    ``key[]``); meta_info's timing keys left out."""
    paths: set[str] = set()
    if not isinstance(obj, dict):
        return frozenset()
    for key, value in obj.items():
        if prefix.endswith("meta_info") and key in TIMING_KEYS:
            continue
        path = f"{prefix}.{key}" if prefix else key
        if value is None:
            paths.add(path + "=null")
        elif isinstance(value, dict):
            paths.add(path)
            paths |= key_paths(value, path)
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            paths.add(path + "[]")
            for item in value:
                paths |= key_paths(item, path + "[]")
        else:
            paths.add(path)
    return frozenset(paths)


# A kind that a server may merge into the next one: steps delivered in one update (SGLang's
# TokenizerManager merges queued outputs, the simulator's streamer does when it lags) make one
# chunk, so content chunks before a content+finish chunk, or updates before the final one, are
# not told apart.
_MERGES_INTO = {"content": "content+finish", "update": "final"}


def kinds(route: str, capture: Capture) -> list[str]:
    """Chunk kinds in order, a run of one kind collapsed to one entry (and one merged into
    the chunk that may absorb it, see _MERGES_INTO)."""
    out: list[str] = []
    for event in capture.events():
        k = kind(route, event)
        if out and _MERGES_INTO.get(out[-1]) == k:
            out.pop()
        if not out or out[-1] != k:
            out.append(k)
    return out


def keys_by_kind(route: str, capture: Capture) -> dict[str, list[list[str]]]:
    """For each chunk kind, the distinct key sets its chunks had."""
    found: dict[str, set[frozenset[str]]] = {}
    for event in capture.events():
        if event != "[DONE]":
            found.setdefault(kind(route, event), set()).add(key_paths(event))
    return {k: sorted(sorted(keys) for keys in sets) for k, sets in sorted(found.items())}


def usage_placement(route: str, capture: Capture) -> dict[str, Any]:
    """Where the token counts sit: per chunk kind, whether ``usage`` is absent, null or an
    object; and how far the final count is above the last one streamed with a choice."""
    where: dict[str, set[str]] = {}
    streamed: list[int] = []
    final: int | None = None
    for event in capture.events():
        if event == "[DONE]":
            continue
        k = kind(route, event)
        if route == "generate":
            count = event["meta_info"].get("completion_tokens")
            where.setdefault(k, set()).add("meta_info" if count is not None else "none")
            if count is not None:
                streamed.append(count)
                final = count
            continue
        usage = event.get("usage", "absent")
        where.setdefault(k, set()).add(
            "absent" if usage == "absent" else "null" if usage is None else "object")
        if isinstance(usage, dict):
            if event["choices"]:
                streamed.append(usage["completion_tokens"])
            else:
                final = usage["completion_tokens"]
    gap = None if final is None or not streamed else final - streamed[-1]
    return {"usage": {k: sorted(v) for k, v in sorted(where.items())},
            "final_minus_last_streamed": gap, "streamed": streamed}


def merged_a_step(route: str, capture: Capture, case: Case) -> bool:
    """Whether the server sent two steps' output in one chunk (a step's count never streamed):
    SGLang's TokenizerManager keeps only the newest output of a request it had no time to
    serve, which a busy machine causes, not the serving code under test."""
    streamed = set(usage_placement(route, capture)["streamed"])
    return not set(case.counts_before_the_last_step) <= streamed


# Every sampling override specbench sends (protocols.SAMPLING_KEYS), with values SGLang keeps
# as given (temperature above 0: at 0 it turns greedy and rewrites top_k).
SAMPLING = {
    "temperature": 0.5, "top_p": 0.9, "top_k": 20, "min_p": 0.05, "frequency_penalty": 0.1,
    "presence_penalty": 0.2, "repetition_penalty": 1.05, "seed": 7, "stop": ["zzz"],
    "stop_token_ids": [3], "stop_regex": ["qqq"], "min_tokens": 1, "ignore_eos": False,
    "no_stop_trim": True, "skip_special_tokens": False, "logit_bias": {"5": -1.0},
}
TOOLS = ({"type": "function", "function": {
    "name": "run_tests", "description": "Run the test suite.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                   "required": []}}},)


def sampled_request(route: str, tool_choice: Any = None) -> PromptRequest:
    """A row with every sampling override (and, for chat, tools and `tool_choice`); its
    script is ``sampled<route>``."""
    return PromptRequest(
        id=f"oracle/sampled{route}", prompt_set="oracle", category="oracle",
        messages=({"role": "user", "content": f"run sampled{route}"},), max_tokens=64,
        tools=TOOLS if route == "chat" else None, tool_choice=tool_choice,
        sampling=dict(SAMPLING),
    )


def all_scripts() -> dict[str, list[list[str]]]:
    scripts = {case.name: [list(step) for step in case.steps] for case in CASES}
    for route in ROUTES:
        scripts[f"sampled{route}"] = [["def"], ["sort"], [EOS]]
    return scripts
