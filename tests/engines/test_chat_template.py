"""The model's own chat template on the text-in protocols of a real engine (issue 13, item 4).

Which renderer each engine picks, and the one-line errors, run here. Rendering with a real
tokenizer needs transformers, which specbench's own environment does not have: those tests run
a script under the SGLang contract interpreter (``$SPECBENCH_SGLANG_PYTHON``, which has
transformers and tokenizers) that builds a small local tokenizer with a chat template at test
time, and skip without one.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from specbench import config
from specbench.config import SweepConfig
from specbench.engines.attach import AttachEngine
from specbench.engines.process import ServerStartError
from specbench.engines.sglang import SGLangEngine
from specbench.engines.simulated import SimEngine
from specbench.load.chat_template import (
    ChatTemplateError,
    chat_messages,
    chat_tools,
    load_chat_template,
)
from specbench.load.protocols import SPECBENCH_TEXT
from specbench.prompts import PromptRequest

REPO = Path(__file__).resolve().parents[2]
TEMPLATE_PYTHON = os.environ.get("SPECBENCH_SGLANG_PYTHON", sys.executable)

READ = {"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}
GREP = {"type": "function", "function": {"name": "grep", "parameters": {"type": "object"}}}
CALL = {"id": "call_1", "type": "function",
        "function": {"name": "read", "arguments": '{"path": "a.py"}'}}
ROW = PromptRequest(
    id="agent-1", prompt_set="t", category="c", max_tokens=32, tools=(READ, GREP),
    messages=(
        {"role": "system", "content": "You edit code."},
        {"role": "user", "content": "Fix a.py"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1",
         "content": [{"type": "text", "text": "x = 1"}, {"type": "text", "text": "y = 2"}]},
    ),
)  # fmt: skip


def cfg(engine: str, protocol: str, **server: Any) -> SweepConfig:
    return config.build({
        "engine": engine, "load": {"protocol": protocol}, "server": server,
        "attach": [["baseline", "http://127.0.0.1:1"]] if engine == "attach" else [],
        "modes": ["baseline"],
    })  # fmt: skip


# ------------------------------------------------------------------ which renderer, per engine
def test_the_simulator_keeps_specbench_rendering_and_chat_renders_nothing() -> None:
    assert SimEngine(cfg("sim", "openai-completions")).prompt_renderer() is SPECBENCH_TEXT
    assert SimEngine(cfg("sim", "sglang-native")).prompt_renderer() is SPECBENCH_TEXT
    assert SimEngine(cfg("sim", "openai-chat")).prompt_renderer() is None
    assert SGLangEngine(cfg("sglang", "openai-chat")).prompt_renderer() is None


def test_attach_renders_like_the_server_it_finds() -> None:
    engine = AttachEngine(cfg("attach", "openai-completions"))
    assert engine.prompt_renderer({"sim_profile": "llama", "model_path": "m"}) is SPECBENCH_TEXT
    with pytest.raises(ServerStartError, match="names no tokenizer_path"):
        engine.prompt_renderer({"version": "0.5.23"})
    assert AttachEngine(cfg("attach", "openai-chat")).prompt_renderer({"model_path": "m"}) is None


def test_without_transformers_a_real_engine_refuses_in_one_line_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers fails
    engine = SGLangEngine(cfg("sglang", "openai-completions", model_path=str(tmp_path)))
    with pytest.raises(ChatTemplateError) as exc:
        engine.prompt_renderer()
    message = str(exc.value)
    assert "pip install 'specbench[chat-template]'" in message
    assert "--protocol openai-chat" in message and "\n" not in message
    attach = AttachEngine(cfg("attach", "sglang-native"))
    with pytest.raises(ChatTemplateError, match=r"specbench\[chat-template\]"):
        attach.prompt_renderer({"tokenizer_path": str(tmp_path)})
    with pytest.raises(ChatTemplateError, match=r"specbench\[chat-template\]"):
        load_chat_template(str(tmp_path))


# ------------------------------------------------------------------ messages as SGLang prepares
def test_messages_are_prepared_as_sglangs_chat_route_does_without_touching_the_row() -> None:
    messages = chat_messages(ROW)
    assert messages[2]["content"] == ""
    assert messages[2]["tool_calls"][0]["function"]["arguments"] == {"path": "a.py"}
    assert messages[3]["content"] == "x = 1 y = 2"
    assert ROW.messages[2]["content"] is None  # the row itself is unchanged
    assert ROW.messages[2]["tool_calls"][0]["function"]["arguments"] == '{"path": "a.py"}'


def test_tools_follow_tool_choice_as_on_the_chat_route() -> None:
    import dataclasses

    assert chat_tools(ROW) == [READ, GREP]
    assert chat_tools(dataclasses.replace(ROW, tool_choice="none")) is None
    named = {"type": "function", "function": {"name": "grep"}}
    assert chat_tools(dataclasses.replace(ROW, tool_choice=named)) == [GREP]
    assert chat_tools(dataclasses.replace(ROW, tools=None)) is None


# ------------------------------------------------------------------ a real tokenizer
# Runs under TEMPLATE_PYTHON: builds tokenizers, renders, prints one JSON object.
SCRIPT = textwrap.dedent('''
    import dataclasses, json, sys
    from pathlib import Path

    from specbench import config
    from specbench.engines.sglang import SGLangEngine
    from specbench.load.chat_template import ChatTemplateError, load_chat_template
    from specbench.load.protocols import PROTOCOLS, BodyOptions
    from tests.engines.test_chat_template import ROW, TEMPLATE, build

    root = Path(sys.argv[1])
    out = {}
    with_bos = build(root / "adds-bos", TEMPLATE, adds_bos=True)
    plain = build(root / "plain", TEMPLATE, adds_bos=False)
    build(root / "no-template", None, adds_bos=False)
    renderer = load_chat_template(str(plain))
    out["name"] = renderer.name
    out["text"] = renderer.render(ROW)
    out["again_same_object"] = renderer.render(ROW) is renderer.render(ROW)
    out["tool_choice_none"] = renderer.render(dataclasses.replace(ROW, tool_choice="none"))
    out["bos_dropped"] = load_chat_template(str(with_bos)).render(ROW)
    options = BodyOptions(renderer=renderer)
    out["completions_prompt"] = json.loads(
        PROTOCOLS["openai-completions"].encode(ROW, "m", 0.0, options))["prompt"]
    out["native_text"] = json.loads(
        PROTOCOLS["sglang-native"].encode(ROW, "m", 0.0, options))["text"]
    cfg = config.build({
        "engine": "sglang", "load": {"protocol": "sglang-native"},
        "server": {"model_path": str(root / "missing"),
                   "extra_args": ["--tokenizer-path", str(plain)]}})
    out["engine_name"] = SGLangEngine(cfg).prompt_renderer().name
    errors = {}
    for key, path in (("missing", root / "missing"), ("no_template", root / "no-template")):
        try:
            load_chat_template(str(path))
        except ChatTemplateError as exc:
            errors[key] = str(exc)
    bad = build(root / "raises", "{{ raise_exception('roles must alternate') }}", False)
    try:
        load_chat_template(str(bad)).render(ROW)
    except ChatTemplateError as exc:
        errors["render"] = str(exc)
    out["errors"] = errors
    print(json.dumps(out))
''')

# Header per turn, tools as JSON, tool calls with their arguments as JSON, EOS after each turn.
TEMPLATE = (
    "{{ bos_token }}{% if tools %}<|tools|>{{ tools | tojson }}<|eot|>{% endif %}"
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}"
    "{% for c in m.get('tool_calls') or [] %}<call>{{ c['function']['name'] }} "
    "{{ c['function']['arguments'] | tojson }}</call>{% endfor %}<|eot|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
EXPECTED_TURNS = (
    "<|system|>You edit code.<|eot|><|user|>Fix a.py<|eot|>"
    '<|assistant|><call>read {"path": "a.py"}</call><|eot|><|tool|>x = 1 y = 2<|eot|><|assistant|>'
)


def build(path: Path, template: str | None, adds_bos: bool) -> Path:
    """A word-level tokenizer saved at `path` (called under TEMPLATE_PYTHON): BOS/EOS special
    tokens, the template, and, like Llama's, a post-processor that adds BOS when asked."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {"<|unk|>": 0, "<|bos|>": 1, "<|eot|>": 2, "hello": 3}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<|unk|>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    if adds_bos:
        tok.post_processor = processors.TemplateProcessing(
            single="<|bos|> $A", special_tokens=[("<|bos|>", 1)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|bos|>",
                                   eos_token="<|eot|>", unk_token="<|unk|>")
    if template is not None:
        fast.chat_template = template
    fast.save_pretrained(path)
    return path


def _has_transformers(python: str) -> bool:
    if python == sys.executable:
        return all(importlib.util.find_spec(m) for m in ("transformers", "tokenizers", "jinja2"))
    probe = "import transformers, tokenizers, jinja2"
    try:
        return subprocess.run([python, "-c", probe], capture_output=True, timeout=120,
                              stdin=subprocess.DEVNULL).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if not _has_transformers(TEMPLATE_PYTHON):
        pytest.skip(f"{TEMPLATE_PYTHON} has no transformers/tokenizers; set "
                    "SPECBENCH_SGLANG_PYTHON to the contract venv "
                    "(scripts/install_sglang_contract.sh)")
    root = tmp_path_factory.mktemp("tokenizers")
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run([TEMPLATE_PYTHON, "-c", SCRIPT, str(root)], capture_output=True,
                          text=True, timeout=300, cwd=REPO, env=env, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-4000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.contract
@pytest.mark.slow
def test_a_real_tokenizer_renders_the_row_with_its_own_template(rendered: dict[str, Any]) -> None:
    tools = json.dumps([READ, GREP], ensure_ascii=False)
    assert rendered["text"] == f"<|bos|><|tools|>{tools}<|eot|>{EXPECTED_TURNS}"
    assert rendered["tool_choice_none"] == f"<|bos|>{EXPECTED_TURNS}"
    assert rendered["again_same_object"] is True  # rendered once, then reused
    assert rendered["name"].startswith("chat template of ") and "sha256" in rendered["name"]


@pytest.mark.contract
@pytest.mark.slow
def test_the_text_routes_send_the_templates_text(rendered: dict[str, Any]) -> None:
    assert rendered["completions_prompt"] == rendered["text"] == rendered["native_text"]


@pytest.mark.contract
@pytest.mark.slow
def test_a_bos_the_server_adds_itself_is_not_sent_twice(rendered: dict[str, Any]) -> None:
    assert rendered["bos_dropped"] == rendered["text"].removeprefix("<|bos|>")


@pytest.mark.contract
@pytest.mark.slow
def test_the_engine_loads_the_servers_tokenizer_path(rendered: dict[str, Any]) -> None:
    assert rendered["engine_name"].startswith("chat template of ")
    assert rendered["engine_name"].split(" (")[0].endswith("/plain")


@pytest.mark.contract
@pytest.mark.slow
@pytest.mark.parametrize("case, needle", [
    ("missing", "cannot load the tokenizer for the model's chat template from"),
    ("no_template", "has no chat template"),
    ("render", "prompt 'agent-1': the chat template of"),
])  # fmt: skip
def test_what_cannot_render_is_one_line(rendered: dict[str, Any], case: str, needle: str) -> None:
    message = rendered["errors"][case]
    assert needle in message and "\n" not in message
    assert message.endswith("or use --protocol openai-chat, where the server applies the "
                            "template itself")


def test_the_tokenizer_path_flag_is_read_in_both_spellings() -> None:
    from specbench.engines.argv import flag_value

    assert flag_value(("--tokenizer-path", "/a", "--x"), "--tokenizer-path") == "/a"
    assert flag_value(("--tokenizer-path=/b",), "--tokenizer-path") == "/b"
    assert flag_value(("--tokenizer-path-x", "/c"), "--tokenizer-path") is None
