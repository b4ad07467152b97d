"""An already-running server (a cluster, another team's deployment): nothing is launched.

The mode each URL claims is checked against what its `/server_info` says, so a run directory
made by attaching means the same as one made by launching.
"""

from __future__ import annotations

import json
import urllib.error

from specbench.engines.process import ServerStartError, http_get


def fetch_server_info(base_url: str, timeout_s: float = 10.0) -> dict:
    try:
        status, body = http_get(f"{base_url.rstrip('/')}/server_info", timeout_s=timeout_s)
    except (OSError, urllib.error.URLError) as exc:
        raise ServerStartError(
            f"cannot reach {base_url} ({exc}); check the --attach URL and that the server is up"
        ) from None
    if status != 200:
        raise ServerStartError(
            f"{base_url}/server_info answered HTTP {status}; is this an SGLang server?"
        )
    try:
        info = json.loads(body)
    except json.JSONDecodeError:
        raise ServerStartError(
            f"{base_url}/server_info did not return JSON; is this an SGLang server?"
        ) from None
    if not isinstance(info, dict):
        raise ServerStartError(
            f"{base_url}/server_info did not return an object; is this an SGLang server?"
        )
    return info


def wait_ready(base_url: str, timeout_s: float) -> None:
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            status, _ = http_get(f"{base_url.rstrip('/')}/ready", timeout_s=2.0)
            if status == 200:
                return
        except (OSError, urllib.error.URLError):
            pass
        time.sleep(0.2)
    raise ServerStartError(
        f"{base_url} did not answer /ready with 200 within {timeout_s:.0f} s; check the server"
    )
