"""`python -m specbench.sim <SGLang 0.5.23 flags> [--sim-*]`: run the simulated SGLang server."""

from __future__ import annotations

import sys

from specbench.sim.lifecycle import set_parent_death_signal


def main(argv: list[str] | None = None) -> int:
    """Arm the parent-death signal first, then import and run the server (exit code)."""
    set_parent_death_signal()
    from specbench.sim.cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
