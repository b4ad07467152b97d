"""Execute notebooks/crossover.ipynb against a run directory (used by .ci/run).

Usage: python scripts/run_notebook.py RUN_DIR [OTHER_RUN_DIR]
The notebook is stored without outputs; this runs it in a fresh kernel and fails on any error.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "crossover.ipynb"


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: run_notebook.py RUN_DIR [OTHER_RUN_DIR]", file=sys.stderr)
        return 2
    os.environ["SPECBENCH_RUN"] = argv[0]
    if len(argv) > 1:
        os.environ["SPECBENCH_RUN_B"] = argv[1]
    os.environ.setdefault("MPLBACKEND", "Agg")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3").execute()
    print(f"notebook executed: {len(nb.cells)} cells against {argv[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
