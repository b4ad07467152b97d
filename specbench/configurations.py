"""Named server configurations: the unit a sweep iterates over.

A configuration is a small typed description of one server (speculative or not, how many draft
steps, whether drafting is switched by batch size), named so that its points land in
`points/<name>/...`. The three user-facing modes are three such names:

- `baseline`: no speculation;
- `eagle3`: static EAGLE-3 at the sweep's K (`--spec-steps`);
- `dynamic`: EAGLE-3 through SGLang's `--speculative-adaptive`, K steps below a batch-size
  threshold T and zero steps from T on; T comes from the measured crossover (per prompt set) or
  `--threshold`.

More are spelled by name, so adding one to a sweep is data, not code: `eagle3-k<K>` (static
EAGLE-3 at K steps), `eagle3-k<K>-t<TOPK>-d<N>` (static EAGLE-3 drafting a tree: K steps,
TOPK branches per step, N draft tokens verified per request), `dynamic-t<T>` (the dynamic
server at a fixed T), `zero-step` (every batch at steps 0: SGLang's no-drafting path, which is
not a plain server), `sglang-default` (`--speculative-adaptive` without a config: SGLang's
built-in EMA schedule) and `tuned` (a per-batch-size steps schedule chosen from the measured
static curves). Every dynamic server drafts a chain: SGLang 0.5.23's adaptive mode takes
topk 1 only, so a tree is measured as a static server and no threshold holds for it.

A dynamic server's adaptive JSON is a :class:`Schedule`: batch-size slots, each with a single
candidate step count, so SGLang's EMA policy has nothing to move and the steps are a pure
function of the batch size.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from specbench.errors import ConfigError

Kind = Literal["baseline", "eagle3", "dynamic"]
# How a dynamic server's steps follow the batch size: one threshold T (K below, 0 from T on),
# SGLang's built-in default config, or a tuned per-slot schedule.
Adaptive = Literal["threshold", "default", "schedule"]
# The default sweep: both static curves, the zero-step curve the dynamic server switches to,
# and the dynamic server at the one-server threshold (where EAGLE-3 meets zero-step).
DEFAULT_NAMES: tuple[str, ...] = ("baseline", "eagle3", "zero-step", "dynamic")
# The two decisions and the servers each compares: c*, EAGLE-3 against the plain server; T,
# EAGLE-3 against its own zero-step path (the adaptive plan bisects each on its pair).
DECISION_PAIRS: dict[str, tuple[str, str]] = {"c*": ("eagle3", "baseline"),
                                              "T": ("eagle3", "zero-step")}
# `specbench tune`: the static curves the schedule is picked from, SGLang's default, the schedule.
TUNE_NAMES: tuple[str, ...] = (
    "baseline",
    "eagle3-k1",
    "eagle3-k2",
    "eagle3",
    "eagle3-k5",
    "zero-step",
    "sglang-default",
    "tuned",
)
# The K `sglang-default` launches at: the largest of SGLang's built-in adaptive candidates
# ([0, 1, 3, 5, 7] in 0.5.23, [0, 1, 3, 7] in 0.5.17). Bare `--speculative-adaptive` starts at
# the middle one, 3, and on 0.5.17 does not start at all: its CUDA graphs' shared logits buffer
# is sized by the launch's K, too small for the graphs of K = 7 (an H100 run, results/gpu/
# README.md). Each slot's EMA moves from its starting K to the same steps within ~25 verifies
# (a slot starts at the launch's K where it is a candidate, else at its middle candidate).
SGLANG_DEFAULT_LAUNCH_STEPS = 7
# Named configurations that are not spelled with a number.
_NAMED: dict[str, tuple[Kind, int | None, Adaptive | None]] = {
    "baseline": ("baseline", None, None),
    "eagle3": ("eagle3", None, None),
    "dynamic": ("dynamic", None, "threshold"),
    "zero-step": ("dynamic", 1, "threshold"),
    "sglang-default": ("dynamic", None, "default"),
    "tuned": ("dynamic", None, "schedule"),
}
_STATIC_K = re.compile(r"^eagle3-k(?P<k>[1-9][0-9]?)$")
_STATIC_TREE = re.compile(
    r"^eagle3-k(?P<k>[1-9][0-9]?)-t(?P<topk>[1-9][0-9]?)-d(?P<d>[1-9][0-9]{0,3})$"
)
_DYNAMIC_T = re.compile(r"^dynamic-t(?P<t>[1-9][0-9]{0,4})$")
_HELP = (
    "choose baseline, eagle3, dynamic, zero-step, sglang-default, tuned, eagle3-k<K> "
    "(static EAGLE-3 at K steps), eagle3-k<K>-t<TOPK>-d<N> (static EAGLE-3 drafting a tree) "
    "or dynamic-t<T> (drafting stops at batch size T)"
)


@dataclass(frozen=True)
class Schedule:
    """Steps per batch-size slot, as SGLang's adaptive JSON routes them.

    `slots` are (smallest batch size, steps) pairs in increasing order; a batch uses the slot
    with the largest key <= its size (below the first key, the first slot).
    """

    slots: tuple[tuple[int, int], ...]

    @classmethod
    def from_slots(cls, slots: Mapping[str, int]) -> Schedule:
        """From SGLang's JSON keys as the manifest, analysis.json and --schedule hold them."""
        return cls(tuple(sorted((int(key), int(steps)) for key, steps in slots.items())))

    @classmethod
    def from_threshold(cls, steps: int, threshold: int) -> Schedule:
        """K steps below batch size T, none from T on.

        With T == 1 every batch runs zero steps; K still has to appear in some slot (a "0" slot
        no batch reaches), or SGLang refuses the explicit `--speculative-num-steps K` as "not in
        the adaptive config candidate_steps".
        """
        if threshold <= 1:
            return cls(((0, steps), (1, 0)))
        return cls(((1, steps), (threshold, 0)))

    @property
    def launch_steps(self) -> int:
        """The `--speculative-num-steps` to launch with: SGLang sizes its buffers for the
        largest candidate, and the flag must be one of the candidates."""
        return max(steps for _, steps in self.slots)

    @property
    def threshold(self) -> int | None:
        """T when this is a "K below T, none from T on" schedule; None otherwise."""
        if len(self.slots) != 2 or self.slots[1][1] != 0 or self.slots[0][1] == 0:
            return None
        return self.slots[1][0]

    def steps_at(self, batch_size: int) -> int:
        chosen = self.slots[0][1]
        for key, steps in self.slots:
            if key <= batch_size:
                chosen = steps
        return chosen

    def to_json(self) -> dict[str, dict[str, list[int]]]:
        return {str(key): {"candidate_steps": [steps]} for key, steps in self.slots}

    @classmethod
    def from_json(cls, config: dict[str, object]) -> Schedule | None:
        """The schedule of an adaptive JSON whose every slot has one candidate; else None."""
        slots = []
        for key, entry in config.items():
            if not key.isdigit():
                continue
            steps = entry.get("candidate_steps") if isinstance(entry, dict) else None
            if not isinstance(steps, list) or len(steps) != 1 or not isinstance(steps[0], int):
                return None
            slots.append((int(key), steps[0]))
        return cls(tuple(sorted(slots))) if slots else None


@dataclass(frozen=True)
class ServerConfiguration:
    """One server to launch (or attach) and measure.

    `kind` is what the server's /server_info must show; `steps` is K for speculative kinds
    (None: the sweep's `--spec-steps`); `adaptive` says how a dynamic server's steps follow the
    batch size, and `threshold` is a fixed T for a threshold server (None: the sweep chooses it
    once the static curves are measured).
    """

    name: str
    kind: Kind
    steps: int | None = None
    threshold: int | None = None
    adaptive: Adaptive | None = None
    # The draft's shape: branches per step (1: a chain) and draft tokens verified per request
    # (None: K + 1, all a chain has; SGLang forces that for topk 1).
    topk: int = 1
    draft_tokens: int | None = None

    @property
    def speculative(self) -> bool:
        return self.kind != "baseline"

    @property
    def tree(self) -> bool:
        return self.topk > 1

    @property
    def needs_analysis(self) -> bool:
        """A dynamic server whose schedule is only known once the static curves are in."""
        if self.adaptive == "schedule":
            return True
        return self.adaptive == "threshold" and self.threshold is None

    def num_steps(self, default_steps: int) -> int:
        return self.steps if self.steps is not None else default_steps

    def num_draft_tokens(self, default_steps: int) -> int:
        """Tokens verified per request and step: N for a tree, K + 1 for a chain."""
        if self.draft_tokens is not None:
            return self.draft_tokens
        return self.num_steps(default_steps) + 1

    def draft_words(self, default_steps: int) -> str:
        """The draft configuration in words: "a chain of 3 steps (topk 1, 4 draft tokens)"."""
        k, n = self.num_steps(default_steps), self.num_draft_tokens(default_steps)
        if self.tree:
            return f"a tree of {k} steps (topk {self.topk}, {n} draft tokens)"
        return f"a chain of {k} steps (topk 1, {n} draft tokens)"


def tree_candidates(steps: int, topk: int) -> int:
    """Draft tokens SGLang 0.5.23's EAGLE worker proposes per request before it keeps the best
    N - 1 of them: topk from the first step, topk x topk from each later one (every kept branch
    extends by topk; eagle_utils.organize_draft_results ranks them all)."""
    return topk + (steps - 1) * topk * topk


def _tree(name: str, steps: int, topk: int, draft_tokens: int) -> ServerConfiguration:
    """A static tree configuration, refused (ConfigError, one line) where SGLang would not run
    it as a tree."""
    if topk == 1:
        raise ConfigError(
            f"mode {name}: topk 1 is a chain, which verifies K + 1 = {steps + 1} draft tokens "
            f"whatever d says (SGLang forces it); use eagle3-k{steps}, or a topk of 2 or more"
        )
    if draft_tokens < 2:
        raise ConfigError(
            f"mode {name}: {draft_tokens} draft token leaves nothing to verify beyond the last "
            f"accepted token; give d of 2 or more (e.g. eagle3-k{steps}-t{topk}-d8)"
        )
    most = tree_candidates(steps, topk) + 1
    if draft_tokens > most:
        raise ConfigError(
            f"mode {name}: {steps} step{'s' if steps > 1 else ''} of topk {topk} propose "
            f"{most - 1} draft tokens, so SGLang "
            f"cannot pick {draft_tokens - 1} of them (its CUDA-graph capture fails at start-up); "
            f"give d of at most {most}, or more steps or a larger topk"
        )
    return ServerConfiguration(name, "eagle3", steps=steps, topk=topk, draft_tokens=draft_tokens)


def parse(name: str) -> ServerConfiguration:
    """The configuration a name stands for; ConfigError (one line) for an unknown name."""
    if name in _NAMED:
        kind, threshold, adaptive = _NAMED[name]
        return ServerConfiguration(name, kind, threshold=threshold, adaptive=adaptive)
    if m := _STATIC_K.match(name):
        return ServerConfiguration(name, "eagle3", steps=int(m["k"]))
    if m := _STATIC_TREE.match(name):
        return _tree(name, int(m["k"]), int(m["topk"]), int(m["d"]))
    if m := _DYNAMIC_T.match(name):
        return ServerConfiguration(name, "dynamic", threshold=int(m["t"]), adaptive="threshold")
    raise ConfigError(f"unknown mode {name!r}; {_HELP}")


def ordered(names: Iterable[str], default_steps: int) -> list[ServerConfiguration]:
    """Configurations in measuring order: baseline, static EAGLE-3 (by K), dynamic servers with
    a fixed schedule, then those whose schedule comes from the measured curves."""
    configs = [parse(n) for n in names]

    def rank(c: ServerConfiguration) -> tuple[int, int, str]:
        group = {"baseline": 0, "eagle3": 1, "dynamic": 2}[c.kind] + (1 if c.needs_analysis else 0)
        default_first = 0 if c.name in ("eagle3", "zero-step") else 1
        if c.steps is None:
            return (group, default_first, c.name)
        # By K, a chain before the trees of its K, trees by topk then draft tokens.
        return (group, default_first, f"{c.steps:03d}-{c.topk:03d}-{c.draft_tokens or 0:05d}")

    return sorted(configs, key=rank)


def analyzable(names: Iterable[str]) -> bool:
    """Whether a decision can be computed: EAGLE-3's curve and the baseline's (c*) or the
    zero-step path's (the one-server T)."""
    present = set(names)
    return "eagle3" in present and bool(present & {"baseline", "zero-step"})
