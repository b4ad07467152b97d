"""Context-length buckets: a prompt set turned into requests whose prompts fall in a token range.

`--context-lengths 2k,8k,32k` names bucket tops; each bucket holds prompts of more than the
previous top and at most its own (the first from 0), and each prompt set is measured once per
bucket, as the set ``<set>@<bucket>`` (so a bucket is part of every point's key and every
analysis, gate and export keyed by prompt set sees it).

How a set fills a bucket, deterministically and from the set's own text:
- a session (one row: its snapshots share a history) whose shortest snapshot already falls in
  the bucket is taken as it is;
- a shorter session is extended, every snapshot alike, so its shortest snapshot lands in the
  lower half of the bucket: its first user message is prefixed with excerpts from the other
  sessions of the set (code and tool output: the repository the request works on), the same
  excerpts for every snapshot, so snapshots still share their prefix as a real session's do;
- snapshots that end up above the bucket are left out.
The client cannot tokenize, so sizes are estimated at 4 characters per token and every bucket
is aimed at a band inside it (`_BAND`) that holds for tokenizers between about 3 and 5
characters per token, with the tool schemas counted for the top and not for the bottom (a
template may leave them out); the tokens each request really carried (the server's count) are
recorded per point and reported.
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass, replace

from specbench.prompts.model import (
    CHARS_PER_TOKEN,
    PromptRequest,
    PromptSet,
    PromptSetError,
    message_chars,
)

BUCKET_SEP = "@"
# The share of a bucket aimed at: estimated prompt tokens in [low * 1.3, high * 0.75].
_BAND = (1.3, 0.75)
# A bucket with fewer requests than this cannot hold a point's window; refuse it.
MIN_REQUESTS = 16
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)([kK]?)$")
# Part of a bucketed set's hash: a resumed run refuses requests built by another version.
_VERSION = 2
_EXCERPT_HEADER = "Context from the repository (excerpts you may need):\n\n"


@dataclass(frozen=True)
class ContextBucket:
    """Prompts of more than `low_tokens` and at most `high_tokens` tokens, named like "8k"."""

    name: str
    low_tokens: int
    high_tokens: int

    @property
    def range_text(self) -> str:
        """"2k-8k prompt tokens" ("up to 2k" for the first bucket)."""
        low = _short(self.low_tokens)
        return (f"up to {_short(self.high_tokens)}" if self.low_tokens == 0
                else f"{low}-{_short(self.high_tokens)}") + " prompt tokens"

    def band(self) -> tuple[float, float]:
        """Estimated prompt tokens aimed at (see the module docstring)."""
        return self.low_tokens * _BAND[0], self.high_tokens * _BAND[1]


def _short(tokens: int) -> str:
    return f"{tokens // 1024}k" if tokens % 1024 == 0 and tokens >= 1024 else f"{tokens:,}"


def parse_context_lengths(names: tuple[str, ...]) -> tuple[ContextBucket, ...]:
    """"2k", "8k", "32k" (k = 1024 tokens, or a plain token count) -> buckets in rising order.

    Raises ValueError with the one-line cause and fix.
    """
    tops: list[tuple[int, str]] = []
    for name in names:
        found = _SIZE.match(name.strip())
        if not found:
            raise ValueError(f"--context-lengths: {name!r} is not a token count; give bucket "
                             "tops such as 2k,8k,32k (k = 1024 tokens) or 2048,8192")
        tokens = int(float(found.group(1)) * (1024 if found.group(2) else 1))
        if tokens < 64:
            raise ValueError(f"--context-lengths: {name} is below 64 tokens; give bucket tops "
                             "such as 2k,8k,32k")
        tops.append((tokens, name.strip()))
    tops.sort()
    if len({t for t, _ in tops}) != len(tops):
        raise ValueError("--context-lengths: two buckets have the same top; give each top "
                         "once, e.g. 2k,8k,32k")
    lows = [0, *(t for t, _ in tops)][:len(tops)]
    return tuple(ContextBucket(name, low, top) for low, (top, name) in zip(lows, tops, strict=True))


def bucket_set_name(set_name: str, bucket: ContextBucket) -> str:
    return f"{set_name}{BUCKET_SEP}{bucket.name}"


def split_bucket(set_name: str) -> tuple[str, str | None]:
    """"coding@8k" -> ("coding", "8k"); a set without a bucket -> (name, None)."""
    base, sep, bucket = set_name.rpartition(BUCKET_SEP)
    return (base, bucket) if sep and base else (set_name, None)


def _est_tokens(request: PromptRequest, extra_chars: int = 0, *, tools: bool = True) -> float:
    """Estimated prompt tokens; `tools=False` leaves out the tool schemas, which some chat
    templates do not render (the constructed H200 model's did not: its agentic prompts came
    out about 1.1k tokens shorter than estimated)."""
    chars = request.input_chars if tools else message_chars(request.messages)
    return (chars + extra_chars) / CHARS_PER_TOKEN


def _excerpts(ps: PromptSet) -> list[tuple[str, str]]:
    """(session id, text) of every user and tool message longer than a line, in file order."""
    seen: set[tuple[str, str]] = set()
    out: list[tuple[str, str]] = []
    for request in ps.requests:
        for message in request.messages:
            text = message.get("content")
            if message.get("role") in ("user", "tool") and isinstance(text, str) \
                    and text.count("\n") >= 2 and (request.session_id, text) not in seen:
                seen.add((request.session_id, text))
                out.append((request.session_id, text))
    return out


def _context_block(pool: list[tuple[str, str]], session: str, chars: int, seed: str) -> str:
    """About `chars` characters of excerpts from sessions other than `session`."""
    others = [text for owner, text in pool if owner != session]
    if not others:
        return ""
    rng = random.Random(seed)
    parts: list[str] = []
    total = len(_EXCERPT_HEADER)
    while total < chars:
        text = others[rng.randrange(len(others))]
        piece = f"--- excerpt {len(parts) + 1} ---\n{text}\n\n"
        if total + len(piece) > chars:  # cut the last excerpt at a line end
            cut = piece.rfind("\n", 0, chars - total)
            piece = piece[:cut + 1] if cut > 0 else piece[:chars - total]
        parts.append(piece)
        total += len(piece)
    return _EXCERPT_HEADER + "".join(parts)


def _with_context(request: PromptRequest, block: str, set_name: str) -> PromptRequest:
    messages = [dict(m) for m in request.messages]
    first_user = next(i for i, m in enumerate(messages) if m.get("role") == "user")
    messages[first_user]["content"] = block + messages[first_user]["content"]
    return replace(request, prompt_set=set_name, messages=tuple(messages))


def bucket_prompt_set(ps: PromptSet, bucket: ContextBucket) -> PromptSet:
    """The requests of `ps` that fall in `bucket`, extended where short (module docstring)."""
    name = bucket_set_name(ps.name, bucket)
    low, high = bucket.band()
    pool = _excerpts(ps)
    sessions: dict[str, list[PromptRequest]] = {}
    for request in ps.requests:
        sessions.setdefault(request.session_id or request.id, []).append(request)
    requests: list[PromptRequest] = []
    for session, snapshots in sessions.items():
        # The low end counts no tool schemas and the high end counts them, so a prompt lands
        # in the bucket whether or not the server's template renders the tools.
        shortest = min(_est_tokens(r, tools=False) for r in snapshots)
        block = ""
        has_user = all(any(m.get("role") == "user" for m in r.messages) for r in snapshots)
        if shortest < low and has_user:
            seed = f"specbench-context/{ps.name}/{bucket.name}/{session}"
            # The shortest snapshot lands in the lower half of the band.
            target = random.Random(seed).uniform(low, (low + high) / 2)
            block = _context_block(pool, session, round((target - shortest) * CHARS_PER_TOKEN),
                                   seed)
        for request in snapshots:
            if low <= _est_tokens(request, len(block), tools=False) \
                    and _est_tokens(request, len(block)) <= high:
                requests.append(_with_context(request, block, name) if block
                                else replace(request, prompt_set=name))
    if len(requests) < MIN_REQUESTS:
        raise PromptSetError(
            f"prompt set {ps.name} has only {len(requests)} requests in the context bucket "
            f"{bucket.name} ({bucket.range_text}); need {MIN_REQUESTS}: choose other "
            "--context-lengths or a set with prompts of that length")
    digest = hashlib.sha256(
        f"{ps.sha256}/{bucket.name}/{bucket.low_tokens}-{bucket.high_tokens}/{_VERSION}".encode()
    ).hexdigest()
    rows = len({r.session_id or r.id for r in requests})  # the sessions the bucket kept
    return PromptSet(name=name, path=ps.path, sha256=digest, rows=rows,
                     requests=tuple(requests), source=ps.source)


def bucketed_sets(
    sets: dict[str, PromptSet], bucket_names: tuple[str, ...]
) -> dict[str, PromptSet]:
    """Each set once per bucket it can fill (``set@bucket``). A bucket a set cannot fill is left
    out; a set that fills none raises PromptSetError (the first bucket's reason)."""
    out: dict[str, PromptSet] = {}
    buckets = parse_context_lengths(bucket_names)
    for ps in sets.values():
        problems = []
        for bucket in buckets:
            try:
                filled = bucket_prompt_set(ps, bucket)
            except PromptSetError as exc:
                problems.append(exc)
                continue
            out[filled.name] = filled
        if len(problems) == len(buckets):
            raise problems[0]
    return out
