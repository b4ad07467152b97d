"""The model's own chat template, for the text-in protocols on a real engine.

SGLang applies the model's chat template only on ``/v1/chat/completions``; ``/v1/completions``
and ``/generate`` tokenize the text they are given. So that those routes get the prompt the chat
route would have built (and the target and the EAGLE-3 draft see the prompts they were trained
on), a real engine renders each row here with the model's tokenizer,
``apply_chat_template(messages, tools=..., add_generation_prompt=True, tokenize=False)``, after
preparing the messages as SGLang's chat route does (``serving_chat.py`` ``_apply_jinja_template``):
a null content becomes "", assistant tool-call arguments given as JSON text become objects, a
tool result given as text parts becomes one string, and the tools are left out under
``tool_choice: "none"`` (only the named one under a named choice). The server then tokenizes the
text with its special tokens, so a BOS the template writes is dropped when the tokenizer adds
one itself (SGLang's bench_serving strips it for the same reason).

The simulator keeps specbench's own fixed rendering (`protocols.render_prompt`).
transformers is optional (the ``chat-template`` extra; SGLang's own environment has it) and is
imported only here, when a real engine measures a text-in protocol.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from specbench.errors import UserError
from specbench.load.protocols import PromptRenderer
from specbench.prompts import PromptRequest

EXTRA = "chat-template"
_DETAIL_CHARS = 200
_CHAT_FIX = "or use --protocol openai-chat, where the server applies the template itself"


class ChatTemplateError(UserError, ValueError):
    """The model's chat template cannot be loaded or cannot render a row."""


def load_chat_template(
    path: str, *, source: str = "--model-path", trust_remote_code: bool = False
) -> PromptRenderer:
    """A renderer with the chat template of the tokenizer at `path` (a directory or a Hugging
    Face id; `source` says where the path came from, for the error line)."""
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise ChatTemplateError(
            "rendering prompts with the model's chat template (the completions and native "
            f"protocols on a real server) needs transformers; pip install 'specbench[{EXTRA}]', "
            f"{_CHAT_FIX}"
        ) from None
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
    except Exception as exc:  # a bad path is OSError, ValueError, KeyError... depending on why
        raise ChatTemplateError(
            f"cannot load the tokenizer for the model's chat template from {path} ({source}): "
            f"{_one_line(exc)}; pass a model directory or Hugging Face id that has a "
            f"tokenizer, {_CHAT_FIX}"
        ) from None
    template = getattr(tokenizer, "chat_template", None)
    if not template:
        raise ChatTemplateError(
            f"the tokenizer at {path} ({source}) has no chat template to render prompts with; "
            f"use a model whose tokenizer has one, {_CHAT_FIX}"
        )
    chat = ChatTemplate(tokenizer, path)
    digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:12]
    return PromptRenderer(f"chat template of {path} (sha256 {digest})", chat.render)


class ChatTemplate:
    """Renders rows with one tokenizer's template; each row once (points reuse the rows)."""

    def __init__(self, tokenizer: Any, path: str) -> None:
        self.tokenizer = tokenizer
        self.path = path
        bos, bos_id = tokenizer.bos_token, tokenizer.bos_token_id
        # The server encodes the text with its special tokens: does that add a BOS already?
        adds_bos = bos_id is not None and tokenizer("")["input_ids"][:1] == [bos_id]
        self.drop_bos: str | None = bos if bos and adds_bos else None
        # Keyed by id(); the row is kept with its text so that an id is never reused.
        self._rendered: dict[int, tuple[PromptRequest, str]] = {}

    def render(self, request: PromptRequest) -> str:
        cached = self._rendered.get(id(request))
        if cached is not None and cached[0] is request:
            return cached[1]
        try:
            text = self.tokenizer.apply_chat_template(
                chat_messages(request), tools=chat_tools(request),
                add_generation_prompt=True, tokenize=False,
            )  # fmt: skip
        except Exception as exc:  # a template's raise_exception, or a row it cannot take
            raise ChatTemplateError(
                f"prompt {request.id!r}: the chat template of {self.path} cannot render it "
                f"({_one_line(exc)}); fix the row, {_CHAT_FIX}"
            ) from None
        if self.drop_bos:
            text = text.removeprefix(self.drop_bos)
        self._rendered[id(request)] = (request, text)
        return text


def chat_messages(request: PromptRequest) -> list[dict[str, Any]]:
    """The row's messages as SGLang's chat route hands them to the template (copies)."""
    out = []
    for message in request.messages:
        msg = dict(message)
        if msg.get("content") is None:
            msg["content"] = ""
        if msg.get("role") == "tool" and isinstance(msg["content"], list):
            parts = msg["content"]
            if all(isinstance(p, str) or (isinstance(p, dict) and p.get("type") == "text")
                   for p in parts):
                msg["content"] = " ".join(p if isinstance(p, str) else str(p.get("text", ""))
                                          for p in parts)
        if msg.get("role") == "assistant" and isinstance(msg.get("tool_calls"), list):
            msg["tool_calls"] = [_parsed_arguments(call) for call in msg["tool_calls"]]
        out.append(msg)
    return out


def _parsed_arguments(call: Any) -> Any:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("arguments"), str):
        return call
    try:
        arguments = json.loads(function["arguments"])
    except json.JSONDecodeError:
        return call  # SGLang's chat route would refuse it; the text route sends it as is
    if not isinstance(arguments, dict):
        return call
    return {**call, "function": {**function, "arguments": arguments}}


def chat_tools(request: PromptRequest) -> list[dict[str, Any]] | None:
    """The tools the chat route renders: none under "none", the named one under a named
    choice, else all of them."""
    if not request.tools or request.tool_choice == "none":
        return None
    choice = request.tool_choice
    if isinstance(choice, dict):
        wanted = (choice.get("function") or {}).get("name")
        named = [t for t in request.tools if (t.get("function") or {}).get("name") == wanted]
        return named or None
    return list(request.tools)


def _one_line(exc: BaseException) -> str:
    """transformers' message on one line (it often spans several), cut to a readable length."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= _DETAIL_CHARS else text[: _DETAIL_CHARS - 3] + "..."
