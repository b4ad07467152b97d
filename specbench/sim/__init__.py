"""Simulated SGLang 0.5.23 server: same flags and HTTP API, GPU step times from a cost model.

`python -m specbench.sim <sglang flags> [--sim-*]` is a drop-in for `sglang serve` on a machine
without a GPU: specbench's sweeps, tests and CI run against it. Modules: `args` (flags and
SGLang's resolution rules), `costmodel` (step-time model and profiles), `workload` (prompt ->
token counts, output length, acceptance), `scheduler` (continuous batching on a virtual clock),
`server` (aiohttp app and entry point).
"""
