"""The load generator: closed-loop users against one base URL, speaking one protocol.

It knows nothing of engines or modes: :func:`runner.run_point` gets a :class:`PointSpec` (URL,
protocol, model name, concurrency, requests, window) and returns a :class:`PointResult` of
per-request records that :mod:`specbench.metrics` turns into a summary row.
"""
