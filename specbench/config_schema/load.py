"""The load section: how each point is measured (closed loop, or open-loop arrivals)."""

from __future__ import annotations

import json
from typing import Any

from pydantic import field_validator, model_validator

from specbench.config_schema.fields import Protocol, Section, option, secret
from specbench.errors import ConfigError
from specbench.rules.bodies import check_extra_body
from specbench.rules.slo import SLO_KEYS

# A window kept open for --min-window-requests ends at this many times --window-s at the latest
# (--max-window-s unset): 32 s of an 8-s window, about eight answers at c = 1 from a model that
# takes 4 s per answer.
MAX_WINDOW_FACTOR = 4.0


class LoadConfig(Section):
    """How each point is measured."""

    protocol: Protocol = option(
        "openai-chat", "openai-chat | openai-completions | sglang-native", cli="--protocol"
    )
    warmup_s: float = option(
        2.0, "unmeasured load before each window (GPU seconds)", cli="--warmup-s", ge=0
    )
    # ...and until about this many requests per user have ended (steady state, not the
    # cold-start prefill wave) and the server answers at its own pace (a first-use compile
    # is over: load/runner.py), capped at warmup_max_s in all.
    warmup_requests_per_user: float = option(1.0, "warmup: requests ended per user", ge=0)
    warmup_max_s: float = option(
        60.0, "warmup cap, first-use compiles included (GPU seconds)", cli="--warmup-max-s", ge=0
    )
    window_s: float = option(8.0, "measured window per point (GPU seconds)", cli="--window-s", gt=0)
    # At low load a window holds few answers (under two at c = 1 from a slow model),
    # so latency and acceptance rest on one or two requests. A closed-loop window stays open
    # past window_s until this many requests have finished in it, up to max_window_s; where N
    # finish inside window_s (most levels) nothing changes. Every engine: on the simulator
    # too, an 8-s window at coding c = 1 held 2-4 answers (`--plan dense`).
    min_window_requests: int = option(
        8,
        "closed loop: keep a window open past --window-s until this many requests finished "
        "in it, up to --max-window-s",
        cli="--min-window-requests",
        ge=1,
    )
    max_window_s: float | None = option(
        None,
        "longest a window kept open by --min-window-requests (GPU seconds; --window-s: off)",
        cli="--max-window-s",
        help_default=f"{MAX_WINDOW_FACTOR:g} x --window-s",
        gt=0,
    )
    window_max_requests: int | None = option(None, "end a window after this many requests", ge=1)
    request_timeout_s: float = option(
        600.0, "per-request timeout (s)", cli="--request-timeout-s", gt=0
    )
    temperature: float = option(0.0, "sampling temperature", cli="--temperature", ge=0)
    seed: int = option(0, "prompt order seed", cli="--seed")
    repeats: int = option(1, "repeats per point", cli="--repeats", ge=1)
    error_budget: float = option(
        0.01, "fraction of requests in the window that may fail", ge=0, le=1
    )
    api_key: str | None = secret("bearer token for the server", "--api-key", "SPECBENCH_API_KEY")
    # One event loop per client process (load/procs.py); 0 picks one per 64 users, at most
    # half the cores.
    client_procs: int = option(
        1, "client processes per point (0: automatic)", cli="--client-procs", ge=0
    )
    # Test knob: CPU burnt per network read in the client, to plant a slow client.
    planted_read_delay_us: float = option(
        0.0, "test knob: client CPU burnt per read", cli="--planted-read-delay-us", hidden=True
    )
    # As SGLang's bench_serving --extra-request-body and vLLM's --extra-body: merged into the
    # top level of every body (on /generate, sampling keys go into sampling_params); keys
    # specbench sets itself are refused. Where they go and why: load/protocols.py.
    extra_request_body: dict[str, Any] = option(
        {},
        "JSON object merged into every request body, e.g. '{\"top_k\": 20}'",
        cli="--extra-request-body",
    )
    ignore_eos: bool = option(
        False, "generate exactly max_tokens per request (SGLang ignore_eos)", cli="--ignore-eos"
    )
    # Open loop (load/arrivals.py): the levels are request rates instead of --concurrency.
    request_rates: tuple[float, ...] = option(
        (),
        "open loop: comma list of request rates (requests per GPU second) to sweep instead of "
        "--concurrency; inf sends the top --concurrency level's requests at once",
        cli="--request-rates",
        parse="rates",
    )
    burstiness: float = option(
        1.0, "open loop: gamma shape of the gaps between arrivals (1: Poisson, < 1: burstier)",
        cli="--burstiness", gt=0,
    )
    max_concurrency: int | None = option(
        None, "open loop: at most this many requests in flight (arrivals wait)",
        cli="--max-concurrency", help_default="no cap", ge=1,
    )
    slo: dict[str, float] = option(
        {},
        "latency SLOs for goodput, e.g. ttft_ms=2000,tpot_ms=40,e2e_ms=20000 (model ms; a "
        "request counts when it meets every one)",
        cli="--slo",
        parse="slo",
    )
    percentiles: tuple[int, ...] = option(
        (50, 90, 99), "latency percentiles shown in the summary and report (of 50,90,95,99)",
        cli="--percentiles", parse="csv_int",
    )

    @field_validator("request_rates")
    @classmethod
    def _positive_rates(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if any(not r > 0 for r in value):
            raise ConfigError("--request-rates: every rate must be > 0 (or inf); "
                              "give e.g. --request-rates 2,8,32,inf")
        return tuple(sorted(set(value)))

    @field_validator("percentiles")
    @classmethod
    def _known_percentiles(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if not value or any(q not in (50, 90, 95, 99) for q in value):
            raise ConfigError(f"--percentiles {','.join(map(str, value))}: specbench keeps "
                              "p50, p90, p95 and p99; give some of them, e.g. 50,90,99")
        return tuple(sorted(set(value)))

    @field_validator("slo")
    @classmethod
    def _known_slo(cls, value: dict[str, float]) -> dict[str, float]:
        for key, limit in value.items():
            if key not in SLO_KEYS or not limit > 0:
                raise ConfigError(f"slo {key}={limit}: keys are {', '.join(SLO_KEYS)}, each "
                                  "> 0 ms; give e.g. --slo ttft_ms=2000,tpot_ms=40")
        return value

    @field_validator("extra_request_body", mode="before")
    @classmethod
    def _json_object(cls, value: Any) -> Any:
        """The command line gives the object as JSON text; a TOML table arrives parsed."""
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                raise ConfigError(
                    f"--extra-request-body {value!r} is not JSON ({exc}); "
                    "give one JSON object, e.g. --extra-request-body '{\"top_k\": 20}'"
                ) from None
        if not isinstance(value, dict):
            raise ConfigError(
                f"--extra-request-body must be a JSON object, not {value!r}; "
                "give e.g. --extra-request-body '{\"top_k\": 20}'"
            )
        return value

    def window_cap_s(self) -> float:
        """The longest a closed-loop window may stay open (GPU seconds)."""
        if self.max_window_s is not None:
            return self.max_window_s
        return MAX_WINDOW_FACTOR * self.window_s

    @model_validator(mode="after")
    def _cap_not_below_window(self) -> LoadConfig:
        if self.max_window_s is not None and self.max_window_s < self.window_s:
            raise ConfigError(
                f"--max-window-s {self.max_window_s:g} is below --window-s {self.window_s:g}; "
                "give a cap >= --window-s (equal turns --min-window-requests off)"
            )
        return self

    @model_validator(mode="after")
    def _measurable_extra_body(self) -> LoadConfig:
        if self.extra_request_body:
            check_extra_body(self.extra_request_body, self.protocol)
        return self
