"""One line for a configuration that fails validation: where, what was given, and the fix."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from specbench.errors import ConfigError

COMMAND_LINE = "command line"


def one_line(
    exc: ValidationError, source: str, *, flags: dict[str, str], known: dict[str, list[str]]
) -> str:
    """The first error of `exc` as one line.

    `flags` maps dotted field paths to their command-line flags (named instead of the path when
    the value came from the command line); `known` maps a section ("" for the top level) to its
    keys, listed for an unknown key.
    """
    error = exc.errors()[0]
    loc = ".".join(str(part) for part in error["loc"])
    value = error.get("input")
    kind = error["type"]
    ctx: dict[str, Any] = error.get("ctx") or {}
    if kind == "value_error" and isinstance(ctx.get("error"), ConfigError):
        return str(ctx["error"])
    if kind == "extra_forbidden":
        section = loc.split(".")[0] if "." in loc else ""
        keys = known.get(section, known[""])
        return f"{source}: unknown key {loc}; known keys are {', '.join(keys)}"
    fix = _FIXES.get(kind, "fix the value")
    if kind in _BOUND_WORDS:
        bound = next(iter(ctx.values()), "")
        fix = f"use a value {_BOUND_WORDS[kind]} {bound}"
    elif kind == "literal_error":
        fix = f"choose from {ctx.get('expected', '')}"
    name = loc.split(".")[-1] if loc else "value"
    fix = fix.replace("{name}", name)
    if kind == "literal_error":
        return f"unknown {name} {value!r}; {fix}"
    if source == COMMAND_LINE and loc in flags:
        return f"{flags[loc]} {value!r} is not valid ({error['msg'].lower()}); {fix}"
    return f"{source}: {loc or 'value'} = {value!r} is not valid ({error['msg'].lower()}); {fix}"


_FIXES = {
    "float_type": "write a number without quotes, e.g. {name} = 8",
    "int_type": "write a whole number without quotes, e.g. {name} = 2",
    "bool_type": "write true or false",
    "string_type": 'write it as a quoted string, e.g. {name} = "..."',
    "tuple_type": "write a list in brackets, e.g. {name} = [...]",
    "list_type": 'write a list, e.g. {name} = ["..."]',
    "model_type": "write it as a [table]",
    "dict_type": "write it as a [table]",
}
_BOUND_WORDS = {
    "greater_than": ">",
    "greater_than_equal": ">=",
    "less_than": "<",
    "less_than_equal": "<=",
}
