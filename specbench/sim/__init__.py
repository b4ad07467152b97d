"""Simulated SGLang 0.5.23 server: same flags and HTTP API, GPU step times from a cost model.

`python -m specbench.sim <sglang flags> [--sim-*]` is a drop-in for `sglang serve` on a machine
without a GPU: specbench's sweeps, tests and CI run against it. Modules, from the command line
inwards:

* `cli` (process entry: start-up lines, serve until a signal), `args` (flags and SGLang's
  resolution rules), `logs` (SGLang-style log lines), `lifecycle` (die with the parent),
  `ranks` (stand-in processes of the `--tp-size` ranks and the watchdog that ends the server
  when one dies);
* `app` (aiohttp app: routes, readiness, introspection, /flush_cache), `auth` (--api-key,
  --admin-api-key), `openai_api` and `native_api` (the generation endpoints), `sampling`
  (OpenAI fields as SGLang's sampling parameters), `validation` (what SGLang refuses, with
  its messages), `generation` (what the endpoints share), `streaming` (the SSE engine),
  `prometheus` (`/metrics`), `faults` (--sim-* fault injection);
* `frontend` (the tokenizer manager's serial stage before the scheduler, when the profile has
  one), `scheduler` (continuous batching on a virtual clock), `kvpool` (SGLang's admission and
  retraction when the KV pool is short, the load gauges), `request` (one request), `adaptive`
  (SGLang's adaptive step policy), `stats` (counters and diagnostics), `groundtruth` (what was
  really emitted), `prefixcache` (the radix cache model);
* `costmodel` (step-time model and profiles), `workload` (prompt -> token counts, output
  length, acceptance, filler text).
"""
