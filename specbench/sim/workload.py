"""What the simulated model "says": prompt rendering, token counts, output lengths, acceptance.

Speculative decoding is lossless under greedy decoding, so a baseline and an EAGLE-3 server
must produce the same output for the same prompt. The simulator gets that for free by deriving
everything about a request from a seeded hash of its rendered prompt text:

* prompt tokens = ceil(characters / 4) of a deterministic rendering of messages and tools
  (no tokenizer offline; 4 characters per token is the usual English/JSON ratio). A profile
  fitted to a real server can count as that server did instead: ``[workload]
  prompt_renders_tools = false`` (a chat template that renders each message's text only: the
  tool schemas and tool-call JSON are rendered, hashed and cached as before, but not counted)
  and either ``prompt_chars_per_token`` (its tokenizer's characters per token) or
  ``prompt_tokens_per_piece`` (its tokens per piece of a byte-level BPE's pre-tokenizer split:
  words, numbers, runs of symbols, whitespace; within a few percent per request where
  characters miss by 10-25%, because code and prose pack different characters per token);
* the natural output length (where the model would stop on its own) is log-normal around a
  per-workload mean, so identical prompts stop at identical lengths in every mode;
* the per-token acceptance probability alpha of the draft head is drawn around a mean picked
  by the profile's rule table (first regex found in the prompt wins; then "agentic" when the
  request carries tools or tool messages; then the default), unless the profile gives the
  draft's hits by output position (``draft_hits_hex``: a constructed pair whose output does not
  depend on the prompt), which every request then walks;
* output text is a deterministic sequence of short filler tokens.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import random
import re
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

from specbench.sim.bodies import ChatMessage
from specbench.sim.costmodel import Workload

CHARS_PER_TOKEN = 4
TOOLS_HEADER = "<|tools|>\n"  # render_chat's first line when a request carries tools
_NORMAL = NormalDist()

# Filler vocabulary: code-ish pieces so that streamed text looks plausible in logs.
_VOCAB: tuple[str, ...] = (
    "def",
    " ",
    "self",
    ".",
    "(",
    ")",
    ":",
    "\n",
    "    ",
    "return",
    " x",
    " =",
    " 1",
    ",",
    " if",
    " for",
    " in",
    " range",
    "_",
    "value",
    " None",
    " not",
    " and",
    " or",
    "[",
    "]",
    " result",
    " +",
    " -",
    " *",
    " len",
    "(x)",
    " key",
    " item",
    " data",
    " cache",
    " path",
    " import",
    " from",
    " class",
    " test",
    " assert",
    " ==",
    " True",
    " False",
    " error",
    " raise",
    " try",
    " except",
    " with",
    " open",
    " file",
    " line",
    " n",
    " i",
    " 0",
    " 2",
    '"',
    "'",
    "{",
    "}",
    " #",
    " the",
    " code",
)
_TOKEN_POOL_SIZE = 1 << 16
_rng = random.Random(20261129)
_TOKEN_POOL: tuple[int, ...] = tuple(_rng.choices(range(len(_VOCAB)), k=_TOKEN_POOL_SIZE))
_TEXT_POOL: tuple[str, ...] = tuple(_VOCAB[i] for i in _TOKEN_POOL)
# The same pieces already escaped for a JSON string, so streams need no json.dumps per chunk
# (escaped once per word: every simulated server builds these pools at start-up).
_JSON_VOCAB: tuple[str, ...] = tuple(json.dumps(word)[1:-1] for word in _VOCAB)
_JSON_POOL: tuple[str, ...] = tuple(_JSON_VOCAB[i] for i in _TOKEN_POOL)
TOKEN_ID_BASE = 1000  # filler token i has id TOKEN_ID_BASE + vocabulary index
del _rng


def _message_text(message: ChatMessage) -> str:
    """A message's content as text (OpenAI content parts joined); "" for none."""
    content = message.get("content")
    if isinstance(content, list):  # OpenAI content parts
        content = "".join(
            str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content
        )
    return str(content or "")


def render_chat(messages: list[ChatMessage], tools: list[Any] | None) -> str:
    """A deterministic text rendering of a chat request (stands in for the chat template)."""
    parts: list[str] = []
    if tools:
        # One line: compact JSON escapes newlines, so the block ends at the next "\n".
        parts.append(
            TOOLS_HEADER + json.dumps(tools, sort_keys=True, separators=(",", ":")) + "\n"
        )
    for message in messages:
        role = str(message.get("role", "user"))
        parts.append(f"<|{role}|>\n{_message_text(message)}")
        tool_calls = message.get("tool_calls")
        if tool_calls:
            parts.append(json.dumps(tool_calls, sort_keys=True, separators=(",", ":")))
        parts.append("\n")
    parts.append("<|assistant|>\n")
    return "".join(parts)


def is_agentic(messages: list[ChatMessage], tools: list[Any] | None) -> bool:
    """Tool use marks agentic work: a tools list, tool results or assistant tool calls."""
    if tools:
        return True
    return any(m.get("role") == "tool" or m.get("tool_calls") for m in messages)


def render_message_text(messages: list[ChatMessage]) -> str:
    """`render_chat` as a template that renders each message's text only would: no tool
    schemas, no tool-call JSON (what `prompt_renders_tools = false` counts)."""
    parts = [f"<|{m.get('role', 'user')}|>\n{_message_text(m)}\n" for m in messages]
    return "".join(parts) + "<|assistant|>\n"


def count_tokens(text: str, chars_per_token: float = CHARS_PER_TOKEN) -> int:
    return max(1, math.ceil(len(text) / chars_per_token))


# A byte-level BPE's pre-tokenizer (GPT-2's split; letters as \w less digits and "_"): every
# piece is encoded on its own, and most pieces of code and prose are one token.
_PIECE = re.compile(r"'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?[^\s\w]+|\s+(?!\S)|\s+")


@functools.lru_cache(maxsize=1024)  # a sweep sends each prompt many times; ~1 ms per 13 kB
def pre_tokenizer_pieces(text: str) -> int:
    """The pieces `_PIECE` splits the text into. A whitespace run that holds a line break and
    an indent counts two: BPE merges rarely cross a line break."""
    pieces = 0
    for piece in _PIECE.findall(text):
        pieces += 2 if "\n" in piece and piece.strip("\n") and piece.isspace() else 1
    return pieces


def count_pieces(text: str, tokens_per_piece: float) -> int:
    return max(1, math.ceil(pre_tokenizer_pieces(text) * tokens_per_piece))


def natural_output_tokens(z: float, mean_tokens: float, sigma: float) -> int:
    """Where a request stops on its own (EOS) at the standard normal deviate `z`: log-normal
    with mean `mean_tokens` (mu = ln(mean) - sigma^2/2), at most 16 means."""
    mu = math.log(max(mean_tokens, 1.0)) - sigma * sigma / 2.0
    natural = math.exp(mu + sigma * z)
    return int(min(max(1, round(natural)), 16 * mean_tokens + 1))


@dataclass(frozen=True)
class RequestTraits:
    """Everything the simulator decides about one request, from its prompt alone."""

    prompt_tokens: int
    natural_output_tokens: int  # where the model stops on its own (EOS)
    alpha: float  # per-token draft acceptance probability
    category: str  # matched rule name, "agentic" or "default"
    seed: int  # seeds the per-request RNG (acceptance draws) and the filler text
    # '1' where the draft's proposal for output token k+1 is right, shared by every request
    # ([acceptance] draft_hits_hex); empty: draws with alpha.
    draft_hits: str = ""


class TraitModel:
    """Maps prompt text to :class:`RequestTraits` for one profile and seed."""

    def __init__(self, workload: Workload, seed: int) -> None:
        self.workload = workload
        self.seed = seed
        self._draft_hits = workload.draft_hits  # decoded once, shared by every request
        self._rules = [
            (
                re.compile(rule.pattern),
                rule.name or rule.pattern,
                rule.alpha,
                rule.output_tokens_mean,
            )
            for rule in workload.rules
        ]

    def count_prompt_tokens(
        self, text: str, messages: list[ChatMessage] | None = None
    ) -> int:
        """Prompt tokens of a prompt (`render_chat`'s text of these messages, or a plain text
        prompt), counted the way the profile's server counts."""
        w = self.workload
        if messages is not None and not w.prompt_renders_tools:
            text = render_message_text(messages)
        if w.prompt_tokens_per_piece > 0:
            return count_pieces(text, w.prompt_tokens_per_piece)
        return count_tokens(text, w.prompt_chars_per_token)

    def kind(self, text: str, *, agentic: bool) -> tuple[str, float, float]:
        """(category, mean alpha, mean natural output tokens) of a prompt: the first
        [acceptance] rule whose regex is found in `text`, else the prompt kind's defaults."""
        w = self.workload
        category, mean_alpha, mean_len = "default", w.default_alpha, w.coding_output_tokens_mean
        if agentic:
            category, mean_alpha, mean_len = (
                "agentic",
                w.agentic_alpha,
                w.agentic_output_tokens_mean,
            )
        for pattern, name, alpha, out_mean in self._rules:
            if pattern.search(text):
                category, mean_alpha = name, alpha
                if out_mean is not None:
                    mean_len = out_mean
                break
        return category, mean_alpha, mean_len

    def traits(
        self,
        text: str,
        *,
        agentic: bool,
        prompt_tokens: int | None = None,
        messages: list[ChatMessage] | None = None,
    ) -> RequestTraits:
        """`messages`: the chat request `text` renders, for a profile that counts the text of
        each message only."""
        digest = hashlib.sha256(
            f"{self.seed}\x00".encode() + text.encode("utf-8", "replace")
        ).digest()
        u_len, u_alpha, u_seed = (
            (int.from_bytes(digest[i : i + 8], "big") + 0.5) / 2.0**64 for i in (0, 8, 16)
        )
        w = self.workload
        category, mean_alpha, mean_len = self.kind(text, agentic=agentic)
        natural_tokens = natural_output_tokens(
            _NORMAL.inv_cdf(u_len), mean_len, w.output_tokens_sigma)
        alpha = mean_alpha + w.alpha_jitter_sd * _NORMAL.inv_cdf(u_alpha)
        alpha = min(w.alpha_max, max(w.alpha_min, alpha))
        return RequestTraits(
            prompt_tokens=(
                prompt_tokens
                if prompt_tokens is not None
                else self.count_prompt_tokens(text, messages)
            ),
            natural_output_tokens=natural_tokens,
            alpha=alpha,
            category=category,
            seed=int(u_seed * 2**62),
            draft_hits=self._draft_hits,
        )


def _filler(pool: tuple[str, ...], seed: int, start: int, stop: int) -> str:
    """Pieces [start, stop) of the request with this seed, from one of the piece pools."""
    offset = seed % _TOKEN_POOL_SIZE
    a, b = offset + start, offset + stop
    if b <= _TOKEN_POOL_SIZE:
        return "".join(pool[a:b])
    return "".join(pool[i % _TOKEN_POOL_SIZE] for i in range(a, b))


def filler_text(seed: int, start: int, stop: int) -> str:
    """Text of output tokens [start, stop) of the request with this seed."""
    return _filler(_TEXT_POOL, seed, start, stop)


def filler_json(seed: int, start: int, stop: int) -> str:
    """`filler_text` as a JSON string literal (quotes included)."""
    return '"' + _filler(_JSON_POOL, seed, start, stop) + '"'


def filler_ids(seed: int, start: int, stop: int) -> list[int]:
    """Token ids of output tokens [start, stop) of the request with this seed."""
    offset = seed % _TOKEN_POOL_SIZE
    return [
        TOKEN_ID_BASE + _TOKEN_POOL[(offset + i) % _TOKEN_POOL_SIZE] for i in range(start, stop)
    ]
