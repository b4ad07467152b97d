"""`specbench sweep`'s options, generated from the config schema (`config_schema/`: each
field's CLI name, help text, type and default), so that an option's name lives in one place;
`cli_layer` turns the parsed values back into a config layer. `specbench slurm` parses the same
options.

Every option's parameter default is None ("not given"), so that the preset and the config file
under the command line still apply; `--help` shows the schema's default (or that of the
command's own layer, `specbench tune`) in typer's `[default: ...]` tag all the same, and the
type the schema validates (`<int>`, `<float>`, `<path>`, `<list[str]>`) rather than the text the
option is first read as.
"""

from __future__ import annotations

import inspect
import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, get_args, get_origin

import typer
from pydantic import BaseModel
from rich.markup import escape

from specbench import config as config_mod
from specbench.cli import text as cli_text
from specbench.presets import PRESETS

_PANELS = {"server": "Server", "sim": "Simulator", "load": "Load"}
_TOP_PANELS = {
    "engine": "Server",
    "modes": "Server",
    "attach": "Server",
    "threshold": "Server",
    "schedule": "Server",
    "max_point_retries": "Server",
    "gpus": "Server",
    "executor": "Server",
    "ray_address": "Server",
    "only_config": "Server",
    "prompt_sets": "Load",
    "concurrency": "Load",
    "results_dir": "Output",
    "run_name": "Output",
}
# The type --help shows for an option read by a parse kind (cli/text.py), as typer names types.
_PARSE_METAVARS = {
    "csv": "list[str]",
    "csv_int": "list[int]",
    "shlex": "str",
    "shlex_each": "list[str]",
    "attach": "list[str]",
    "threshold": "int|auto",
    "gpus": "list[int]|all",
    "weights": "dict[str,float]",
    "rates": "list[float]",
    "slo": "dict[str,float]",
    "schedule": "dict[int,int]",
}
_PLAIN_METAVARS = {int: "int", float: "float", bool: "bool", str: "str", Path: "path"}


@dataclass(frozen=True)
class _Option:
    path: tuple[str, ...]  # ("load", "window_s")
    flag: str  # "--window-s"
    param: str  # "window_s"
    python_type: Any
    parse: str | None
    help: str
    panel: str
    hidden: bool
    envvar: str | None
    metavar: str | None  # "<int>"; None leaves a flag's to typer
    default: str | None  # as typed on the command line; None: --help shows none


def _plain_type(annotation: Any) -> Any:
    """The type typer parses an option's text as (optionals unwrapped, literals as str)."""
    args = [a for a in get_args(annotation) if a is not type(None)]
    if get_origin(annotation) is not None and len(args) == 1 and get_origin(args[0]) is None:
        return args[0]
    if annotation in (int, float, bool, str, Path):
        return annotation
    return str


def _metavar(annotation: Any, parse: str | None) -> str | None:
    if parse in _PARSE_METAVARS:
        return f"<{_PARSE_METAVARS[parse]}>"
    if get_origin(annotation) is dict:
        return "<json>"  # --extra-request-body: one JSON object
    plain = _plain_type(annotation)
    return None if plain is bool else f"<{_PLAIN_METAVARS.get(plain, 'str')}>"


def default_text(value: Any, parse: str | None = None) -> str | None:
    """A default as --help shows it; None for one it need not show (off flags, empty lists).
    Lists are joined with ", " as typer joins its own: a narrow terminal wraps them."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (tuple, list)):
        if not value:
            return None
        return shlex.join(value) if parse == "shlex" else ", ".join(str(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value) if value else None
    return str(value)


def help_with_default(text: str, default: str | None) -> str:
    """Help text with the `[default: ...]` tag typer shows for its own defaults (dim), for
    options whose parameter default is None; rich markup, as the app's help is rendered."""
    if default is None:
        return escape(text)
    return f"{escape(text)} [dim]{escape(f'[default: {default}]')}[/dim]"


def _schema_options() -> list[_Option]:
    options: list[_Option] = []
    sections: list[tuple[tuple[str, ...], type[BaseModel]]] = [((), config_mod.SweepConfig)]
    sections += [((name,), model) for name, model in config_mod.SECTIONS.items()]
    for prefix, model in sections:
        for name, field in model.model_fields.items():
            extra = field.json_schema_extra
            if not isinstance(extra, dict) or not extra.get("cli"):
                continue
            flag = str(extra["cli"])
            kind = str(extra["parse"]) if extra.get("parse") else None
            parse = kind
            plain = _plain_type(field.annotation)
            if parse in ("shlex_each", "attach"):
                python_type: Any = list[str]
            elif parse is None and plain in (int, float):
                # Numbers arrive as text and are parsed here, so a bad one is one line naming
                # the flag rather than click's usage box.
                python_type, parse = str, plain.__name__
            elif parse is not None:
                python_type = str
            else:
                python_type = plain
            panel = _PANELS.get(prefix[0], "") if prefix else _TOP_PANELS.get(name, "Options")
            options.append(
                _Option(
                    path=(*prefix, name),
                    flag=flag,
                    param=flag.lstrip("-").replace("-", "_"),
                    python_type=python_type,
                    parse=parse,
                    help=field.description or "",
                    panel=panel,
                    hidden=bool(extra.get("hidden")),
                    envvar=str(extra["envvar"]) if extra.get("envvar") else None,
                    metavar=_metavar(field.annotation, kind),
                    default=(
                        default_text(field.default, kind)
                        or (str(extra["help_default"]) if extra.get("help_default") else None)
                    ),
                )
            )
    return options


SWEEP_OPTIONS = _schema_options()


def cli_layer(values: dict[str, Any]) -> dict[str, Any]:
    """The options given on the command line as a nested plain-value layer of the config."""
    layer: dict[str, Any] = {}
    for opt in SWEEP_OPTIONS:
        value = values.get(opt.param)
        if value is None or value == []:
            continue
        plain = cli_text.parse_cli_text(opt.parse, value, opt.flag.lstrip("-"))
        target = layer
        for part in opt.path[:-1]:
            target = target.setdefault(part, {})
        target[opt.path[-1]] = plain
    return layer


def _shown_default(opt: _Option, base: dict[str, Any] | None) -> str | None:
    """What --help gives as `opt`'s default: the command's own layer's value, else the schema's."""
    value: Any = base or {}
    for part in opt.path:
        if not isinstance(value, dict) or part not in value:
            return opt.default
        value = value[part]
    return default_text(value, opt.parse)


def sweep_signature(base: dict[str, Any] | None = None) -> inspect.Signature:
    """The sweep's options as a signature typer reads; `base` is the command's own layer of
    defaults (`specbench tune`), shown in --help over the schema's."""
    keyword = inspect.Parameter.KEYWORD_ONLY
    params = [
        inspect.Parameter(
            opt.param,
            keyword,
            default=None,
            annotation=Annotated[
                opt.python_type | None,
                typer.Option(
                    opt.flag,
                    help=help_with_default(opt.help, _shown_default(opt, base)),
                    metavar=opt.metavar,
                    rich_help_panel=opt.panel,
                    hidden=opt.hidden,
                    envvar=opt.envvar,
                    show_default=False,
                ),
            ],
        )
        for opt in SWEEP_OPTIONS
    ]
    fixed: list[tuple[str, Any, Any]] = [
        ("config_file", Path | None, typer.Option("--config", help="TOML file with sweep options")),
        ("resume", Path | None, typer.Option("--resume", help="continue this run directory")),
        ("quick", bool, typer.Option("--quick", help="a short sweep for demos")),
        ("preset", str | None,
         typer.Option("--preset", help=f"named option set: {' | '.join(PRESETS)}")),
        ("dry_run", bool, typer.Option("--dry-run", help="print server commands and the plan")),
    ]
    for name, kind, info in fixed:
        default = False if kind is bool else None
        annotation = Annotated[kind, info]  # type: ignore[valid-type]
        params.append(inspect.Parameter(name, keyword, default=default, annotation=annotation))
    return inspect.Signature(params)
