"""Context-length buckets: parsing, and the requests a prompt set puts in each bucket."""

from __future__ import annotations

from pathlib import Path

import pytest

from specbench import prompts
from specbench.config import resolve
from specbench.errors import ConfigError
from specbench.prompts.context import (
    CHARS_PER_TOKEN,
    bucket_prompt_set,
    parse_context_lengths,
    split_bucket,
)
from tests.harness import run_cli


def test_bucket_tops_become_ranges_in_rising_order() -> None:
    buckets = parse_context_lengths(("32k", "2k", "8192"))
    assert [(b.name, b.low_tokens, b.high_tokens) for b in buckets] == [
        ("2k", 0, 2048), ("8192", 2048, 8192), ("32k", 8192, 32768)]
    assert buckets[0].range_text == "up to 2k prompt tokens"
    assert buckets[2].range_text == "8k-32k prompt tokens"
    assert split_bucket("coding@8k") == ("coding", "8k")
    assert split_bucket("coding") == ("coding", None)


@pytest.mark.parametrize(("given", "says"), [
    ("8q", "'8q' is not a token count"), ("2k,2048", "same top"), ("10", "below 64 tokens")])
def test_bad_buckets_are_one_line(given: str, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        resolve({"context_lengths": tuple(given.split(","))})
    message = str(caught.value)
    assert says in message and "\n" not in message and "2k,8k,32k" in message


def test_buckets_and_a_mix_are_refused() -> None:
    with pytest.raises(ConfigError, match="--mix and --context-lengths"):
        resolve({"context_lengths": ("2k", "8k"), "mix": {"coding": 1.0}})


def test_a_bucket_holds_only_prompts_of_its_size_and_sessions_keep_their_prefix() -> None:
    agentic = prompts.load_prompt_set("agentic")
    low, high = parse_context_lengths(("8k", "32k"))
    filled = bucket_prompt_set(agentic, high)
    assert filled.name == "agentic@32k" and len(filled.requests) >= 100
    lo_band, hi_band = high.band()
    assert all(lo_band <= r.input_chars / CHARS_PER_TOKEN <= hi_band for r in filled.requests)
    assert {r.prompt_set for r in filled.requests} == {"agentic@32k"}
    # Snapshots of one session carry the same added context: their first user message is equal.
    by_session: dict[str, set[str]] = {}
    for r in filled.requests:
        first_user = next(m["content"] for m in r.messages if m["role"] == "user")
        by_session.setdefault(r.session_id, set()).add(first_user)
    assert all(len(firsts) == 1 for firsts in by_session.values())
    # Deterministic: built twice, the same requests; another bucket, other requests.
    assert bucket_prompt_set(agentic, high).requests == filled.requests
    assert bucket_prompt_set(agentic, low).sha256 != filled.sha256


def test_a_set_with_no_prompts_that_short_cannot_fill_the_bucket() -> None:
    agentic = prompts.load_prompt_set("agentic")  # its system prompt alone is over 1k tokens
    with pytest.raises(prompts.PromptSetError, match=r"agentic has only 0 requests .* 1k"):
        bucket_prompt_set(agentic, parse_context_lengths(("1k",))[0])


def test_the_plan_lists_only_the_buckets_each_set_fills_and_refuses_an_empty_set(
    tmp_path: Path,
) -> None:
    plan = run_cli(["sweep", "--dry-run", "--context-lengths", "2k,8k"], tmp_path)
    assert plan.returncode == 0, plan.stderr
    assert "prompt sets coding@2k,coding@8k,agentic@8k x" in " ".join(plan.stdout.split())
    refused = run_cli(["sweep", "--dry-run", "--context-lengths", "1k", "--prompts", "agentic"],
                      tmp_path)
    lines = refused.stderr.strip().splitlines()
    assert refused.returncode == 2 and len(lines) == 1, refused.stderr
    assert "agentic has only 0 requests in the context bucket 1k" in lines[0]
