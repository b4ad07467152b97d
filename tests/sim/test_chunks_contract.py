"""Every chunk and body the simulator sends is what SGLang 0.5.23's own serialisers write.

The simulator's OpenAI streams and responses are read back into SGLang's own types and
written out again the way SGLang writes each kind (tests/sim/sglang_probe.py runs it):
chat role/content/finish chunks through `sse_utils.StreamChunk` (msgspec, defaults
omitted), chat sglext and usage chunks through `ChatCompletionStreamResponse`, completions
chunks through `CompletionStreamResponse` (the final usage chunk without null fields), the
non-streaming bodies through `ChatCompletionResponse` / `CompletionResponse`. A chunk must
come back unchanged: same keys, same nulls, nothing SGLang would add or drop. Skipped
without sglang.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import aiohttp
import pytest

from tests.sim.conftest import EAGLE3_FLAGS, SimProc, sse
from tests.sim.sglang_probe import require_sglang, run_probe

pytestmark = pytest.mark.contract

FAST = ("--sim-time-scale", "20", "--max-running-requests", "64")
OPTIONS = {"include_usage": True, "continuous_usage_stats": True}
PROBE = r"""
import msgspec
from sglang.srt.entrypoints.openai import protocol as p
from sglang.srt.entrypoints.openai.sse_utils import StreamChunk

encoder = msgspec.json.Encoder()

def rewrite(item):
    kind, obj = item["kind"], item["obj"]
    if kind == "chat":
        if obj["choices"]:
            chunk = msgspec.json.decode(json.dumps(obj).encode(), type=StreamChunk)
            return json.loads(encoder.encode(chunk))
        return json.loads(p.ChatCompletionStreamResponse.model_validate(obj).model_dump_json())
    if kind == "completions":
        model = p.CompletionStreamResponse.model_validate(obj)
        final_usage = not obj["choices"] and "sglext" not in obj
        return json.loads(model.model_dump_json(exclude_none=final_usage))
    if kind == "chat-body":
        return p.ChatCompletionResponse.model_validate(obj).model_dump(mode="json")
    return p.CompletionResponse.model_validate(obj).model_dump(mode="json")

print(json.dumps([rewrite(item) for item in JOB]))
"""


def _chat(text: str, **extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": text}], "temperature": 0,
            **extra}  # fmt: skip


def _completion(prompt: str, **extra: Any) -> dict[str, Any]:
    return {"model": "m", "prompt": prompt, "temperature": 0, **extra}


# (server, path, body): streams and bodies covering every chunk kind and option.
CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("eagle", "/v1/chat/completions", _chat("Write a sort.", stream=True, max_tokens=3000,
     stream_options=OPTIONS, return_spec_tokens_details=True)),
    ("eagle", "/v1/chat/completions", _chat("One word.", stream=True, max_tokens=1,
     stream_options=OPTIONS, return_spec_tokens_details=True)),
    ("base", "/v1/chat/completions", _chat("Explain it.", stream=True, max_tokens=40)),
    ("cached", "/v1/chat/completions", _chat("Cache me " * 80, stream=True, max_tokens=20,
     stream_options=OPTIONS)),
    ("eagle", "/v1/completions", _completion("def quicksort(xs):", stream=True,
     max_tokens=3000, stream_options=OPTIONS, return_spec_tokens_details=True)),
    ("base", "/v1/completions", _completion("def f():", stream=True, max_tokens=12,
     ignore_eos=True, stream_options={"include_usage": True})),
    ("cached", "/v1/completions", _completion("Cache me " * 80, stream=True, max_tokens=8,
     stream_options=OPTIONS)),
    ("eagle", "/v1/chat/completions", _chat("Fix it.", max_tokens=60,
     return_spec_tokens_details=True)),
    ("base", "/v1/chat/completions", _chat("Fix it.", max_tokens=60)),
    ("eagle", "/v1/completions", _completion("def g():", max_tokens=30,
     return_spec_tokens_details=True)),
    ("cached", "/v1/completions", _completion("Cache me " * 80, max_tokens=8)),
]  # fmt: skip


@pytest.fixture(scope="module")
def sims(sim_module: Callable[..., SimProc]) -> dict[str, SimProc]:
    return {
        "eagle": sim_module(*FAST, *EAGLE3_FLAGS),
        "base": sim_module(*FAST),
        "cached": sim_module(*FAST, "--enable-cache-report"),
    }


def _collect(sims: dict[str, SimProc]) -> list[dict[str, Any]]:
    async def go() -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        async with aiohttp.ClientSession() as session:
            for server, path, body in CASES:
                kind = "chat" if "chat" in path else "completions"
                url = sims[server].url + path
                if body.get("stream"):
                    status, events = await sse(session, url, body)
                    assert status == 200 and events[-1].data == "[DONE]"
                    items += [{"kind": kind, "obj": e.json} for e in events[:-1]]
                else:
                    async with session.post(url, json=body) as resp:
                        assert resp.status == 200
                        items.append({"kind": f"{kind}-body", "obj": await resp.json()})
        return items

    return asyncio.run(go())


def test_every_chunk_and_body_is_what_sglang_writes(sims: dict[str, SimProc]) -> None:
    require_sglang()
    items = _collect(sims)
    kinds = {json.dumps(sorted(i["obj"])) for i in items}
    assert len(kinds) >= 5, "the cases should cover the chunk kinds"
    rewritten = run_probe(PROBE, items)
    for item, again in zip(items, rewritten, strict=True):
        assert again == item["obj"], item["kind"]
