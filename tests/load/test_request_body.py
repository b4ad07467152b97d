"""What goes into a request body beyond its row: --extra-request-body and --ignore-eos.

The bodies are checked key by key on each route, the refusals through the config (as the command
line builds it), and the effect on the simulator, which honours ignore_eos and min_tokens as
SGLang does: with --ignore-eos every request generates exactly its max_tokens.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from specbench import config
from specbench.errors import ConfigError
from specbench.load import runner
from specbench.load.protocols import (
    PLAIN_BODY,
    PROTOCOLS,
    SPECBENCH_TEXT,
    BodyOptions,
    PromptRenderer,
)
from specbench.prompts import PromptRequest
from tests.harness import sim_server

ROW = PromptRequest(
    id="r1", prompt_set="t", category="c", max_tokens=64,
    messages=({"role": "user", "content": "Write a parser."},),
    tools=({"type": "function", "function": {"name": "read", "parameters": {}}},),
)  # fmt: skip


def body(protocol: str, options: BodyOptions, row: PromptRequest = ROW) -> dict[str, Any]:
    return json.loads(PROTOCOLS[protocol].encode(row, "served", 0.0, options))


# ------------------------------------------------------------------------------ the bodies
@pytest.mark.parametrize("protocol", ["openai-chat", "openai-completions"])
def test_openai_routes_merge_the_extra_keys_at_the_top_level(protocol: str) -> None:
    extra = {"top_k": 20, "chat_template_kwargs": {"enable_thinking": False}}
    sent = body(protocol, BodyOptions(extra=extra, ignore_eos=True))
    assert sent["top_k"] == 20
    assert sent["chat_template_kwargs"] == {"enable_thinking": False}
    assert sent["ignore_eos"] is True  # an SGLang extra field on both OpenAI routes
    # What specbench measures with is untouched.
    assert sent["stream"] is True and sent["return_spec_tokens_details"] is True
    assert sent["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    assert sent["max_tokens"] == 64 and sent["model"] == "served"


def test_without_options_no_body_changes() -> None:
    for name in PROTOCOLS:
        plain = body(name, PLAIN_BODY)
        assert "ignore_eos" not in plain and "ignore_eos" not in plain.get("sampling_params", {})


def test_native_puts_sampling_keys_in_sampling_params_and_the_rest_at_the_top() -> None:
    extra = {"top_k": 20, "seed": 7, "return_logprob": True,
             "sampling_params": {"top_k": 5, "json_schema": "{}"}}
    sent = body("sglang-native", BodyOptions(extra=extra, ignore_eos=True))
    params = sent["sampling_params"]
    # An explicit sampling_params wins over a top-level key mapped into it.
    assert params["top_k"] == 5
    assert params["sampling_seed"] == 7  # under SGLang's name
    assert params["json_schema"] == "{}"
    assert params["ignore_eos"] is True
    assert params["max_new_tokens"] == 64
    assert sent["return_logprob"] is True
    assert not {"top_k", "seed", "ignore_eos"} & set(sent)
    assert sent["stream"] is True


@pytest.mark.parametrize("protocol", list(PROTOCOLS))
def test_the_rows_own_sampling_and_tool_choice_win_over_the_extra_keys(protocol: str) -> None:
    row = dataclasses.replace(ROW, sampling={"top_k": 3, "ignore_eos": False},
                              tool_choice="none")
    sent = body(protocol, BodyOptions(extra={"top_k": 20, "tool_choice": "required"},
                                      ignore_eos=True), row)
    where = sent["sampling_params"] if protocol == "sglang-native" else sent
    assert where["top_k"] == 3 and where["ignore_eos"] is False
    if protocol == "openai-chat":
        assert sent["tool_choice"] == "none"


@pytest.mark.parametrize("protocol, key", [("openai-completions", "prompt"),
                                           ("sglang-native", "text")])
def test_text_routes_render_with_the_engines_renderer(protocol: str, key: str) -> None:
    renderer = PromptRenderer("test", lambda r: f"<{r.id}>")
    assert body(protocol, BodyOptions(renderer=renderer))[key] == "<r1>"
    assert body(protocol, PLAIN_BODY)[key] == SPECBENCH_TEXT.render(ROW)


def test_the_load_config_becomes_the_body_options() -> None:
    cfg = config.build({"load": {"extra_request_body": '{"top_k": 20}', "ignore_eos": True}})
    options = BodyOptions.from_load(cfg.load, None)
    assert options == BodyOptions(extra={"top_k": 20}, ignore_eos=True, renderer=SPECBENCH_TEXT)


# ------------------------------------------------------------------------------ the config
def built(text: Any, protocol: str = "openai-chat") -> config.SweepConfig:
    layer = {"load": {"extra_request_body": text, "protocol": protocol}}
    return config.build(layer, source=config.COMMAND_LINE)


def test_json_text_and_a_toml_table_give_the_same_config_and_the_manifest_keeps_it() -> None:
    from_cli = built('{"top_k": 20, "chat_template_kwargs": {"enable_thinking": false}}')
    from_toml = built({"top_k": 20, "chat_template_kwargs": {"enable_thinking": False}})
    assert from_cli == from_toml
    stored = config.to_dict(config.build({"load": {"ignore_eos": True,
                                                   "extra_request_body": {"top_k": 20}}}))
    assert stored["load"]["extra_request_body"] == {"top_k": 20}
    assert stored["load"]["ignore_eos"] is True
    assert config.from_dict(stored).load.extra_request_body == {"top_k": 20}


def test_a_config_file_takes_a_table(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("[load]\nignore_eos = true\nextra_request_body = {top_k = 20}\n")
    cfg = config.resolve({}, config_file=path)
    assert cfg.load.extra_request_body == {"top_k": 20} and cfg.load.ignore_eos


REFUSED = [
    ('{"top_k": 2', "is not JSON"),
    ("[1, 2]", "must be a JSON object"),
    ('"top_k"', "must be a JSON object"),
    ('{"stream": false}', "sets 'stream'"),
    ('{"stream_options": {}}', "sets 'stream_options'"),
    ('{"return_spec_tokens_details": false}', "sets 'return_spec_tokens_details'"),
    ('{"model": "other"}', "sets 'model'"),
    ('{"messages": []}', "put it in the prompt file's rows"),
    ('{"prompt": "hi"}', "put it in the prompt file's rows"),
    ('{"tools": []}', "sets 'tools'"),
    ('{"max_tokens": 8}', "set max_tokens in the prompt file's rows"),
    ('{"max_completion_tokens": 8}', "set max_tokens in the prompt file's rows"),
    ('{"temperature": 0.7}', "use --temperature"),
    ('{"ignore_eos": true}', "use --ignore-eos"),
    ('{"n": 2}', "one answer per request"),
    ('{"top_k": 0}', "top_k must be -1 (disable) or at least 1"),
    ('{"top_p": "0.5"}', "top_p must be in (0, 1]"),
    ('{"sampling_params": {"top_k": 2}}', "only /generate"),
]


@pytest.mark.parametrize("text, needle", REFUSED, ids=[r[0] for r in REFUSED])
def test_what_would_break_measurement_is_one_line(text: str, needle: str) -> None:
    with pytest.raises(ConfigError) as exc:
        built(text)
    message = str(exc.value)
    assert needle in message and "\n" not in message and "; " in message


NATIVE_REFUSED = [
    ('{"text": "hi"}', "sets 'text'"),
    ('{"sampling_params": 3}', "not an object"),
    ('{"sampling_params": {"max_new_tokens": 9}}', "sampling_params.max_new_tokens"),
    ('{"sampling_params": {"ignore_eos": true}}', "use --ignore-eos"),
    ('{"sampling_params": {"top_p": 0}}', "top_p must be in (0, 1]"),
]


@pytest.mark.parametrize("text, needle", NATIVE_REFUSED, ids=[r[0] for r in NATIVE_REFUSED])
def test_native_refusals(text: str, needle: str) -> None:
    with pytest.raises(ConfigError) as exc:
        built(text, "sglang-native")
    assert needle in str(exc.value)


# ------------------------------------------------------------------------------ the simulator
ROWS = [
    PromptRequest(id=f"p{i}", prompt_set="t", category="c", max_tokens=400,
                  messages=({"role": "user", "content": f"Explain topic {i} in detail."},))
    for i in range(8)
]  # fmt: skip


async def _send_all(base_url: str, protocol: str, options: BodyOptions) -> list[tuple[int, str]]:
    """(completion tokens, finish reason) of every row sent once, all at the same time."""
    proto = PROTOCOLS[protocol]

    async def one(session: aiohttp.ClientSession, row: PromptRequest) -> tuple[int, str]:
        reads, times = [], []
        async with session.post(base_url + proto.path, data=proto.encode(row, "m", 0.0, options),
                                headers={"Content-Type": "application/json"}) as resp:
            assert resp.status == 200, await resp.text()
            async for data in resp.content.iter_any():
                reads.append(data)
                times.append(time.monotonic())
        parsed = proto.parse(reads, times)
        assert parsed.error_class is None, parsed.error_detail
        return parsed.completion_tokens, str(parsed.finish_reason)

    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        return list(await asyncio.gather(*(one(session, row) for row in ROWS)))


@pytest.fixture(scope="module")
def eagle3(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    with sim_server("eagle3", tmp_path_factory.mktemp("sim"), time_scale=16.0) as proc:
        yield proc.base_url


@pytest.mark.slow
@pytest.mark.parametrize("protocol", list(PROTOCOLS))
def test_the_simulator_generates_exactly_max_tokens_under_ignore_eos(
    eagle3: str, protocol: str
) -> None:
    natural = asyncio.run(_send_all(eagle3, protocol, BodyOptions(extra={"top_k": 20})))
    assert any(n < 400 and why == "stop" for n, why in natural), natural  # the control
    fixed = asyncio.run(_send_all(eagle3, protocol,
                                  BodyOptions(extra={"top_k": 20}, ignore_eos=True)))
    assert fixed == [(400, "length")] * len(ROWS)


@pytest.mark.slow
@pytest.mark.parametrize("options", [BodyOptions(ignore_eos=True),
                                     BodyOptions(extra={"min_tokens": 400})],
                         ids=["ignore-eos", "extra-min-tokens"])
def test_every_request_of_a_point_carries_the_options(eagle3: str, options: BodyOptions) -> None:
    spec = runner.PointSpec(base_url=eagle3, protocol="openai-chat", model="m", concurrency=8,
                            requests=ROWS, warmup_s=0.0, window_s=1.0, scrape_metrics=False,
                            body=options)
    result = asyncio.run(runner.run_point(spec))
    done = [r for r in result.records if r.status == "ok"]
    assert done, "no request completed in the window"
    assert {(r.completion_tokens, r.max_tokens) for r in done} == {(400, 400)}
