"""Rebuild prompts/coding.jsonl and prompts/agentic.jsonl (same as `python -m specbench.promptgen`).

Usage: python scripts/gen_prompts.py [--seed N] [--out DIR] [--check]
"""

from __future__ import annotations

import sys

from specbench.promptgen import main

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
