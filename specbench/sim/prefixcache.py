"""A block-level model of SGLang's radix (prefix) cache.

SGLang keeps the KV of finished prompts in a radix tree and reuses the longest cached prefix of
every new prompt (on by default; ``--disable-radix-cache`` turns it off). Without it the agentic
prompt set, whose requests are snapshots of agent sessions that share long histories, would be
prefill-bound in the simulator while real SGLang is not. The model here is deliberately simple
and deterministic:

* the rendered prompt text is cut into fixed blocks of :data:`BLOCK_CHARS` characters
  (:data:`BLOCK_TOKENS` tokens at the simulator's 4 characters per token); a trailing partial
  block is never cached, like a partly filled page;
* block i is keyed by a hash chained over blocks 0..i, so equal keys mean equal prefixes and a
  request's cached prefix is the longest run of its leading keys present in the cache;
* blocks used by running requests are locked (reference-counted) and cannot be evicted; unlocked
  blocks are evicted least recently used first, deepest block of a prefix first (a radix tree
  evicts leaves), when the KV pool needs the room.

The scheduler owns the accounting of the KV pool; this class only knows blocks.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

from specbench.sim.workload import CHARS_PER_TOKEN

BLOCK_TOKENS = 64
BLOCK_CHARS = BLOCK_TOKENS * CHARS_PER_TOKEN


def block_keys(text: str) -> tuple[bytes, ...]:
    """Chained hashes of the full blocks of `text` (a prompt shorter than a block has none)."""
    data = text.encode("utf-8", "replace")
    # Blocks cut on characters (the token proxy), hashed on their bytes.
    n_blocks = len(text) // BLOCK_CHARS
    keys: list[bytes] = []
    prev = b""
    if n_blocks and len(data) == len(text):  # ASCII: character and byte offsets agree
        for i in range(n_blocks):
            prev = hashlib.blake2b(
                prev + data[i * BLOCK_CHARS : (i + 1) * BLOCK_CHARS], digest_size=12
            ).digest()
            keys.append(prev)
        return tuple(keys)
    for i in range(n_blocks):
        chunk = text[i * BLOCK_CHARS : (i + 1) * BLOCK_CHARS].encode("utf-8", "replace")
        prev = hashlib.blake2b(prev + chunk, digest_size=12).digest()
        keys.append(prev)
    return tuple(keys)


class PrefixCache:
    """Cached KV blocks: locked ones (used by running requests) and an LRU of evictable ones."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self._locked: dict[bytes, int] = {}  # key -> running requests holding it
        self._extra_holds = 0  # sum over locked blocks of (holders - 1): reads of a shared block
        self._evictable: OrderedDict[bytes, None] = OrderedDict()  # oldest first
        self.hit_tokens = 0  # since start or the last flush: prompt tokens served from cache
        self.query_tokens = 0  # prompt tokens looked up

    @property
    def size_blocks(self) -> int:
        return len(self._locked) + len(self._evictable)

    @property
    def size_tokens(self) -> int:
        return self.size_blocks * BLOCK_TOKENS

    @property
    def shared_read_tokens(self) -> int:
        """KV tokens that running requests read beyond a block's first holder: a prefix held by
        n running requests counts n - 1 times."""
        return self._extra_holds * BLOCK_TOKENS

    @property
    def evictable_tokens(self) -> int:
        return len(self._evictable) * BLOCK_TOKENS

    def match(self, keys: tuple[bytes, ...]) -> int:
        """Number of leading blocks of `keys` that are cached."""
        if not self.enabled:
            return 0
        n = 0
        for key in keys:
            if key in self._locked or key in self._evictable:
                n += 1
            else:
                break
        return n

    def lock(self, keys: tuple[bytes, ...]) -> int:
        """Hold `keys` for a running request, inserting missing ones; returns blocks added."""
        if not self.enabled:
            return 0
        added = 0
        for key in keys:
            if key in self._locked:
                self._locked[key] += 1
                self._extra_holds += 1
            else:
                if key in self._evictable:
                    del self._evictable[key]
                else:
                    added += 1
                self._locked[key] = 1
        return added

    def unlock(self, keys: tuple[bytes, ...]) -> None:
        """Release `keys`; blocks nobody holds become evictable, most recent last.

        Deepest blocks are released first so that they sit older in the LRU order and are
        evicted before the prefix they extend.
        """
        if not self.enabled:
            return
        for key in reversed(keys):
            held = self._locked.get(key)
            if held is None:
                continue
            if held > 1:
                self._locked[key] = held - 1
                self._extra_holds -= 1
            else:
                del self._locked[key]
                self._evictable[key] = None

    def evict(self, tokens: int) -> int:
        """Free at least `tokens` tokens of unlocked blocks (as many as exist); returns freed."""
        freed = 0
        while freed < tokens and self._evictable:
            self._evictable.popitem(last=False)
            freed += BLOCK_TOKENS
        return freed

    def flush(self) -> None:
        """/flush_cache: drop every unlocked block and the hit statistics."""
        self._evictable.clear()
        self.hit_tokens = self.query_tokens = 0
