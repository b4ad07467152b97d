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
EAGLE-3 at K steps) and `dynamic-t<T>` (the dynamic server at a fixed T).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from specbench.errors import ConfigError

Kind = Literal["baseline", "eagle3", "dynamic"]
DEFAULT_NAMES: tuple[str, ...] = ("baseline", "eagle3", "dynamic")
_STATIC_K = re.compile(r"^eagle3-k(?P<k>[1-9][0-9]?)$")
_DYNAMIC_T = re.compile(r"^dynamic-t(?P<t>[1-9][0-9]{0,4})$")
_HELP = (
    "choose baseline, eagle3, dynamic, eagle3-k<K> (static EAGLE-3 at K steps) "
    "or dynamic-t<T> (drafting stops at batch size T)"
)


@dataclass(frozen=True)
class ServerConfiguration:
    """One server to launch (or attach) and measure.

    `kind` is what the server's /server_info must show; `steps` is K for speculative kinds
    (None: the sweep's `--spec-steps`); `threshold` is a fixed T for a dynamic server (None: the
    sweep chooses it once the static curves are measured).
    """

    name: str
    kind: Kind
    steps: int | None = None
    threshold: int | None = None

    @property
    def speculative(self) -> bool:
        return self.kind != "baseline"

    @property
    def needs_threshold(self) -> bool:
        """A dynamic server whose T is only known after the static curves are in."""
        return self.kind == "dynamic" and self.threshold is None

    def num_steps(self, default_steps: int) -> int:
        return self.steps if self.steps is not None else default_steps


def parse(name: str) -> ServerConfiguration:
    """The configuration a name stands for; ConfigError (one line) for an unknown name."""
    if name in ("baseline", "eagle3", "dynamic"):
        return ServerConfiguration(name, name)  # type: ignore[arg-type]
    if m := _STATIC_K.match(name):
        return ServerConfiguration(name, "eagle3", steps=int(m["k"]))
    if m := _DYNAMIC_T.match(name):
        return ServerConfiguration(name, "dynamic", threshold=int(m["t"]))
    raise ConfigError(f"unknown mode {name!r}; {_HELP}")


def ordered(names: Iterable[str], default_steps: int) -> list[ServerConfiguration]:
    """Configurations in measuring order: baseline, static EAGLE-3 (by K), then dynamic ones.

    Dynamic servers come last because the default one needs the static curves' crossover.
    """
    configs = [parse(n) for n in names]

    def rank(c: ServerConfiguration) -> tuple[int, int, str]:
        group = {"baseline": 0, "eagle3": 1, "dynamic": 2}[c.kind]
        default_first = 0 if c.name in DEFAULT_NAMES else 1
        return (group, default_first, c.name if c.steps is None else f"{c.steps:03d}")

    return sorted(configs, key=rank)


def analyzable(names: Iterable[str]) -> bool:
    """Whether a crossover can be computed: the baseline and EAGLE-3 curves are both there."""
    return {"baseline", "eagle3"} <= set(names)
