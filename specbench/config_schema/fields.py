"""What every section of the schema is made of: `option` (a field that is also a flag), the
frozen section base, and the defaults several sections and callers share."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_CONCURRENCY: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 250)
DEFAULT_PROMPT_SETS: tuple[str, ...] = ("coding", "agentic")
# Used for the dynamic server when the threshold cannot be computed from measured curves
# (e.g. `--modes dynamic` alone): SGLang 0.5.23's own default config stops drafting at 64.
DEFAULT_FIXED_THRESHOLD = 64
SIM_DEFAULT_PROFILE = "llama-3.1-8b-1xh200"
# Servers side by side on one node (--gpus) listen on ports of their own: the server on GPU
# slot k gets --port + PORT_STRIDE x k (SweepConfig.slot_port: run/parallel.py launches on
# it, the dry run in run/plan.py shows it).
PORT_STRIDE = 10

Engine = Literal["sim", "sglang", "attach"]
Protocol = Literal["openai-chat", "openai-completions", "sglang-native"]
ENGINES: tuple[str, ...] = ("sim", "sglang", "attach")
PROTOCOLS: tuple[str, ...] = ("openai-chat", "openai-completions", "sglang-native")


def option(
    default: Any,
    help: str,
    *,
    cli: str | None = None,
    panel: str | None = None,
    parse: str | None = None,
    hidden: bool = False,
    envvar: str | None = None,
    help_default: str | None = None,
    **constraints: Any,
) -> Any:
    """A schema field that is also a command-line option (`cli`, shown in `panel`).

    `parse` names how the option's text becomes the field's value: "csv" (names), "csv_int"
    (levels), "shlex" (one command line), "shlex_each" (repeatable flag strings), "threshold"
    (auto or a batch size), "attach" (repeatable MODE=URL). Fields without `cli` are TOML-only.
    `--help` shows `default` itself; `help_default` says what a None default means instead.
    """
    extra: dict[str, Any] = {
        "cli": cli,
        "panel": panel,
        "parse": parse,
        "hidden": hidden,
        "envvar": envvar,
        "help_default": help_default,
    }
    return Field(default, description=help, json_schema_extra=extra, **constraints)


def secret(help: str, cli: str, envvar: str) -> Any:
    """An option that is never shown (repr) nor written (the manifest) anywhere."""
    extra: dict[str, Any] = {"cli": cli, "envvar": envvar}
    return Field(None, repr=False, exclude=True, description=help, json_schema_extra=extra)


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
