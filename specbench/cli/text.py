"""Command-line text to option values: what `--concurrency 1,8,64` or `--mix a=1,b=2` means.

The option table itself is generated from the config schema (`options.py`); each option's
`parse` kind (field metadata in `config_schema/`) names the function here that turns its text
into the plain value the schema validates.
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path
from typing import Any

from specbench.errors import ConfigError


def parse_concurrency(text: str) -> tuple[int, ...]:
    levels: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            value = int(part)
        except ValueError:
            raise ConfigError(
                f"concurrency level {part!r} is not a whole number; "
                "use a comma-separated list such as 1,2,4,8"
            ) from None
        if value <= 0:
            raise ConfigError(
                f"concurrency level {value} must be at least 1; "
                "use a comma-separated list of positive integers"
            )
        if value in levels:
            raise ConfigError(
                f"concurrency level {value} is given twice; list each level once, e.g. 1,8,64"
            )
        levels.append(value)
    if not levels:
        raise ConfigError("the concurrency list is empty; give at least one level, e.g. 1,8,64")
    return tuple(sorted(set(levels)))


def parse_names(text: str, what: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(p.strip() for p in text.split(",") if p.strip()))
    if not names:
        raise ConfigError(f"no {what} given; name at least one")
    return names


def parse_threshold(text: str | None) -> int | None:
    if text is None or text.strip().lower() == "auto":
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ConfigError(
            f"threshold {text!r} is not a positive integer; "
            "use --threshold auto or a batch size such as 32"
        )
    return value


def parse_attach(items: list[str]) -> list[list[str]]:
    pairs = []
    for item in items:
        name, sep, url = item.partition("=")
        if not sep or not url.startswith(("http://", "https://")):
            raise ConfigError(
                f"--attach {item!r} is not MODE=URL; use e.g. --attach baseline=http://10.0.0.5:30000"
            )
        pairs.append([name, url])
    return pairs


def parse_weights(text: str) -> dict[str, float]:
    weights: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        name, sep, number = part.partition("=")
        try:
            weights[name.strip()] = float(number) if sep else float("nan")
        except ValueError:
            weights[name.strip()] = float("nan")
        if not sep or not name.strip() or not weights[name.strip()] > 0:
            raise ConfigError(
                f"--mix {text!r} is not SET=WEIGHT,...; use e.g. --mix coding=0.5,agentic=0.5"
            )
    if not weights:
        raise ConfigError("--mix is empty; use e.g. --mix coding=0.5,agentic=0.5")
    return weights


def parse_schedule(text: str) -> dict[str, int]:
    """`--schedule 0:5,1:3`: batch-size slot -> draft steps, as SGLang's adaptive JSON keys."""
    slots: dict[str, int] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        key, sep, steps = part.partition(":")
        if not (sep and key.strip().isdigit() and steps.strip().isdigit()):
            raise ConfigError(f"--schedule {text!r} is not SLOT:K,...; give e.g. --schedule "
                              "1:3,25:5,44:3 (from batch size 1 K = 3, from 25 K = 5, ...)")
        slots[str(int(key))] = int(steps)
    if not any(slots.values()):
        raise ConfigError(f"--schedule {text!r} drafts at no batch size; give some slot a K >= 1 "
                          "(a slot 0, which no batch reaches, can hold the K to launch at)")
    return slots


def parse_number(text: str, kind: str, flag: str) -> int | float:
    """A number option's text; `kind` is "int" or "float"."""
    try:
        return int(text) if kind == "int" else float(text)
    except ValueError:
        what = "a whole number" if kind == "int" else "a number"
        raise ConfigError(f"--{flag} {text!r} is not {what}; give e.g. --{flag} 2") from None


def parse_gpus(text: str) -> list[int]:
    """`--gpus 0,1,2,3`, `--gpus 0-7` (a range, ends included) or `--gpus all` (every GPU
    nvidia-smi lists)."""
    if text.strip() == "all":
        try:
            listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True,
                                    timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            listed = ""
        count = sum(line.startswith("GPU ") for line in listed.splitlines())
        if count == 0:
            raise ConfigError("--gpus all: nvidia-smi lists no GPU here; give the ids, e.g. "
                              "--gpus 0,1 (the simulator records them and runs on the CPU)")
        return list(range(count))
    ids: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        first, dash, last = part.partition("-")
        if not first.isdigit() or (dash and not last.isdigit()):
            raise ConfigError(f"--gpus: {part!r} is not a GPU id or range; give e.g. --gpus "
                              "0,1,2,3 or --gpus 0-7")
        if dash and int(last) < int(first):
            raise ConfigError(f"--gpus: the range {part!r} runs backwards; give e.g. --gpus 0-7")
        for gpu in range(int(first), int(last if dash else first) + 1):
            if gpu in ids:
                raise ConfigError(f"--gpus: GPU {gpu} is given twice; list each GPU once")
            ids.append(gpu)
    return ids


def parse_rates(text: str) -> tuple[float, ...]:
    """`--request-rates 2,8,32,inf`: requests per second, inf for all at once."""
    rates: list[float] = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        try:
            value = float(part)
        except ValueError:
            value = float("nan")
        if not value > 0 or part.lower() in ("nan", "-inf"):
            raise ConfigError(f"--request-rates: {part!r} is not a rate > 0 or inf; "
                              "give e.g. --request-rates 2,8,32,inf")
        if value in rates:
            raise ConfigError(f"--request-rates: {part} is given twice; list each rate once")
        rates.append(value)
    if not rates:
        raise ConfigError("--request-rates is empty; give e.g. --request-rates 2,8,32,inf")
    return tuple(sorted(rates))


def parse_cli_text(kind: str | None, value: Any, what: str) -> Any:
    """One option's command-line value as the plain value its schema field takes."""
    if kind == "csv":
        return list(parse_names(value, what))
    if kind == "csv_int":
        return list(parse_concurrency(value))
    if kind == "shlex":
        return shlex.split(value)
    if kind == "shlex_each":
        # Flags given as one string each (`--sim-arg="--sim-stall-s 3"`), split as a shell
        # would; nothing is ever run through a shell.
        return [part for item in value for part in shlex.split(item)]
    if kind == "threshold":
        return parse_threshold(value)
    if kind == "gpus":
        return parse_gpus(value)
    if kind == "attach":
        return parse_attach(value)
    if kind == "weights":
        return parse_weights(value)
    if kind == "rates":
        return list(parse_rates(value))
    if kind == "schedule":
        return parse_schedule(value)
    if kind == "slo":
        from specbench.goodput import parse_slo

        return parse_slo(value)
    if kind in ("int", "float"):
        return parse_number(value, kind, what)
    return str(value) if isinstance(value, Path) else value
