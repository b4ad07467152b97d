"""Entry point of `python -m tools.promptgen` (run from the repository root)."""

from __future__ import annotations

from tools.promptgen.cli import main

raise SystemExit(main())
