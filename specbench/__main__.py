"""`python -m specbench` is the same as the `specbench` command."""

from specbench.cli import app

app()
