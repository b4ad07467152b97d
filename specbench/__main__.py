"""`python -m specbench` is the same as the `specbench` command."""

from specbench.cli.main import app

app()
