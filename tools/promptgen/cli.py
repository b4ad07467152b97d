"""`python -m tools.promptgen`: rebuild the built-in prompt sets, or check they are up to date."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tools.promptgen.build import SET_FILES, generate, render, write_sets
from tools.promptgen.model import DEFAULT_SEED

# <repo>/prompts, the home of the committed sets (the wheel gets them from there too).
DEFAULT_OUT = Path(__file__).resolve().parents[2] / "prompts"
PROG = "python -m tools.promptgen"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Rebuild prompts/coding.jsonl and prompts/agentic.jsonl deterministically.")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="generator seed (default 0)")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if the files in --out differ from a fresh "
                        "build")
    args = parser.parse_args(argv)
    if args.check:
        return _check(args.out, args.seed)
    for name, path in write_sets(args.out, args.seed).items():
        print(f"wrote {path} ({name})")
    return 0


def _check(out: Path, seed: int) -> int:
    stale = [name for name, rows in generate(seed).items()
             if not (out / SET_FILES[name]).is_file()
             or (out / SET_FILES[name]).read_bytes() != render(rows)]
    if stale:
        print(f"prompt sets out of date: {', '.join(stale)}; run `{PROG} --seed {seed}` to "
              "rebuild them", file=sys.stderr)
        return 1
    print(f"prompt sets in {out} are up to date (seed {seed})")
    return 0
