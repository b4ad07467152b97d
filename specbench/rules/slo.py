"""The latency SLOs goodput counts a request against (model milliseconds, each > 0)."""

SLO_KEYS = ("ttft_ms", "tpot_ms", "e2e_ms")
