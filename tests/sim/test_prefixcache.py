"""The simulated radix cache: block keys, LRU eviction, and what clients see over HTTP."""

from __future__ import annotations

import json
from typing import Any

import pytest

from specbench.sim.prefixcache import BLOCK_CHARS, BLOCK_TOKENS, PrefixCache, block_keys
from tests.sim.conftest import SimProc

FAST = ("--sim-time-scale", "20", "--max-running-requests", "16")
HISTORY = "".join(f"step {i}: read file src/module_{i}.py and ran the tests. " for i in range(200))


def test_keys_are_a_chain_over_full_blocks() -> None:
    text = "a" * (3 * BLOCK_CHARS + 10)
    keys = block_keys(text)
    assert len(keys) == 3  # the partial tail block is never cached
    assert block_keys(text) == keys  # deterministic
    assert len(set(keys)) == 3  # equal blocks, different prefixes: different keys
    changed = "b" + text[1:]
    assert not set(block_keys(changed)) & set(keys)  # a change early changes every later key
    assert block_keys(text[: 2 * BLOCK_CHARS] + "z" * BLOCK_CHARS)[:2] == keys[:2]


def test_match_lock_unlock_and_lru_eviction() -> None:
    cache = PrefixCache()
    a = block_keys("x" * 4 * BLOCK_CHARS)
    b = block_keys("y" * 2 * BLOCK_CHARS)
    assert cache.match(a) == 0
    assert cache.lock(a) == 4 and cache.lock(b) == 2
    assert cache.evict(10 * BLOCK_TOKENS) == 0  # locked blocks are never evicted
    cache.unlock(a)
    cache.unlock(b)
    assert cache.match(a) == 4
    assert cache.match(block_keys("x" * 2 * BLOCK_CHARS + "y" * 2 * BLOCK_CHARS)) == 2
    # a was released first, so it is older; its deepest block goes first.
    assert cache.evict(1) == BLOCK_TOKENS
    assert cache.match(a) == 3 and cache.match(b) == 2
    cache.flush()
    assert cache.size_blocks == 0 and cache.match(b) == 0


def test_shared_reads_count_each_block_beyond_its_first_holder() -> None:
    cache = PrefixCache()
    common = block_keys("x" * 3 * BLOCK_CHARS)
    own = block_keys("x" * 3 * BLOCK_CHARS + "y" * BLOCK_CHARS)  # the same 3 blocks and its own
    cache.lock(common)
    assert cache.shared_read_tokens == 0
    cache.lock(own)
    cache.lock(common)
    assert cache.shared_read_tokens == 2 * 3 * BLOCK_TOKENS  # 3 blocks, 3 holders each
    cache.unlock(common)
    cache.unlock(own)
    assert cache.shared_read_tokens == 0
    cache.unlock(common)
    assert cache.shared_read_tokens == 0


def test_disabled_cache_never_hits() -> None:
    cache = PrefixCache(enabled=False)
    keys = block_keys("x" * 4 * BLOCK_CHARS)
    cache.lock(keys)
    cache.unlock(keys)
    assert cache.match(keys) == 0 and cache.size_blocks == 0


def _chat(sim: SimProc, content: str, **extra: Any) -> dict[str, Any]:
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": content}],
        "temperature": 0,
        "max_tokens": 4,
        **extra,
    }
    status, text = sim.post("/v1/chat/completions", body)
    assert status == 200, text
    return dict(json.loads(text))


def _generate(sim: SimProc, text: str) -> dict[str, Any]:
    body = {"text": text, "sampling_params": {"max_new_tokens": 4, "temperature": 0}}
    status, out = sim.post("/generate", body)
    assert status == 200, out
    return dict(json.loads(out)["meta_info"])


@pytest.fixture(scope="module")
def cached(sim_module) -> SimProc:  # type: ignore[no-untyped-def]
    return sim_module(*FAST, "--enable-cache-report")


def test_repeated_prompt_is_cached_and_reported(cached: SimProc) -> None:
    assert cached.get("/flush_cache")[0] == 200
    first = _chat(cached, HISTORY + "What failed?")
    again = _chat(cached, HISTORY + "What failed?")
    prompt = first["usage"]["prompt_tokens"]
    assert first["usage"]["prompt_tokens_details"] == {"cached_tokens": 0}
    hit = again["usage"]["prompt_tokens_details"]["cached_tokens"]
    # Every full block is reused; the tail (less than a block) is computed again.
    assert prompt - BLOCK_TOKENS <= hit < prompt and hit % BLOCK_TOKENS == 0
    info = cached.get_json("/server_info")["sim_prefix_cache"]
    assert info["hit_tokens"] == hit and info["query_tokens"] == 2 * prompt


def test_shared_prefix_is_partly_cached(cached: SimProc) -> None:
    assert cached.get("/flush_cache")[0] == 200
    _generate(cached, HISTORY + "Summarise the session.")
    meta = _generate(cached, HISTORY[: len(HISTORY) // 2] + "Something else entirely. " * 80)
    half_blocks = (len(HISTORY) // 2) // BLOCK_CHARS
    assert meta["cached_tokens"] == half_blocks * BLOCK_TOKENS
    assert 0 < meta["cached_tokens"] < meta["prompt_tokens"]


def test_flush_clears_the_cache(cached: SimProc) -> None:
    _generate(cached, HISTORY)
    assert _generate(cached, HISTORY)["cached_tokens"] > 0
    assert cached.get("/flush_cache")[0] == 200
    assert cached.get_json("/server_info")["sim_prefix_cache"]["size_tokens"] == 0
    assert _generate(cached, HISTORY)["cached_tokens"] == 0


def test_disabled_radix_cache_has_no_hits(start_sim) -> None:  # type: ignore[no-untyped-def]
    sim = start_sim(*FAST, "--disable-radix-cache", "--enable-cache-report")
    for _ in range(2):
        assert _generate(sim, HISTORY)["cached_tokens"] == 0
        assert _chat(sim, HISTORY)["usage"]["prompt_tokens_details"] == {"cached_tokens": 0}
    info = sim.get_json("/server_info")
    assert info["sim_prefix_cache"]["enabled"] is False and info["disable_radix_cache"] is True


def test_without_cache_report_usage_has_no_details(start_sim) -> None:  # type: ignore[no-untyped-def]
    sim = start_sim(*FAST)
    _chat(sim, HISTORY)
    out = _chat(sim, HISTORY)
    # SGLang fills prompt_tokens_details only with --enable-cache-report ...
    assert out["usage"]["prompt_tokens_details"] is None
    # ... but the native meta_info always carries cached_tokens.
    _generate(sim, HISTORY)
    assert _generate(sim, HISTORY)["cached_tokens"] > 0


def test_hits_are_deterministic_across_servers(start_sim) -> None:  # type: ignore[no-untyped-def]
    prompts = [HISTORY[: n * 997] + f"question {n}" for n in (3, 5, 2, 5, 7, 3)]
    runs = []
    for _ in range(2):
        sim = start_sim(*FAST)
        runs.append([_generate(sim, p)["cached_tokens"] for p in prompts])
    assert runs[0] == runs[1]
    assert runs[0][0] == 0 and runs[0][3] > 0 and runs[0][5] > 0


def test_cached_prefix_makes_prefill_cheaper(start_sim) -> None:  # type: ignore[no-untyped-def]
    # Real time (scale 1) so that HTTP overhead is small next to the modelled prefill.
    sim = start_sim("--max-running-requests", "4")
    long_prompt = HISTORY * 4  # ~11k tokens: ~0.3 s of prefill on the Llama profile
    body = {"text": long_prompt, "sampling_params": {"max_new_tokens": 1, "temperature": 0}}
    latencies = []
    for _ in range(2):
        status, out = sim.post("/generate", body)
        assert status == 200, out
        latencies.append(json.loads(out)["meta_info"]["e2e_latency"])
    cold, warm = latencies
    assert cold > 0.2 and warm < 0.3 * cold, latencies
