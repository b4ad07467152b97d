"""`specbench sweep`'s options, generated from the config schema (`config.py`: each field's CLI
name, help text and help panel), so that an option's name lives in one place; `cli_layer` turns
the parsed values back into a config layer. `specbench slurm` parses the same options.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, get_args, get_origin

import typer
from pydantic import BaseModel

from specbench import config as config_mod
from specbench.cli import text as cli_text

_PANELS = {"server": "Server", "sim": "Simulator", "load": "Load"}
_TOP_PANELS = {
    "engine": "Server",
    "modes": "Server",
    "attach": "Server",
    "threshold": "Server",
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


def _plain_type(annotation: Any) -> Any:
    """The type typer parses an option's text as (optionals unwrapped, literals as str)."""
    args = [a for a in get_args(annotation) if a is not type(None)]
    if get_origin(annotation) is not None and len(args) == 1 and get_origin(args[0]) is None:
        return args[0]
    if annotation in (int, float, bool, str, Path):
        return annotation
    return str


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
            parse = extra.get("parse")
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
                    parse=str(parse) if parse else None,
                    help=field.description or "",
                    panel=panel,
                    hidden=bool(extra.get("hidden")),
                    envvar=str(extra["envvar"]) if extra.get("envvar") else None,
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


def sweep_signature() -> inspect.Signature:
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
                    help=opt.help,
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
        ("preset", str | None, typer.Option("--preset", help="named option set: quick | ci")),
        ("dry_run", bool, typer.Option("--dry-run", help="print server commands and the plan")),
    ]
    for name, kind, info in fixed:
        default = False if kind is bool else None
        annotation = Annotated[kind, info]  # type: ignore[valid-type]
        params.append(inspect.Parameter(name, keyword, default=default, annotation=annotation))
    return inspect.Signature(params)
