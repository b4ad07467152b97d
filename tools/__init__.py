"""Development tools run from a checkout (``python -m tools.<name>``); never installed."""
