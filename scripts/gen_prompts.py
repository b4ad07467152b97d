"""Rebuild prompts/coding.jsonl and prompts/agentic.jsonl (same as `python -m tools.promptgen`).

Usage: python scripts/gen_prompts.py [--seed N] [--out DIR] [--check]
"""

from __future__ import annotations

import sys
from pathlib import Path

# The generator is a dev-only package at the repository root, not installed with specbench.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools.promptgen.cli import main

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
