"""`--api-key` and `--admin-api-key`, checked the way SGLang 0.5.23 checks them.

SGLang (`srt/utils/auth.py`, its routes' `auth_level` marks in `http_server.py`):

* OPTIONS requests and paths starting with `/health`, `/ready` or `/metrics` are always
  allowed (probes and Prometheus need no secret);
* "admin optional" routes (`/flush_cache` among those the simulator serves) take the admin
  key when the server has one (the API key is then refused), else the API key, else nothing;
* every other route takes the API key when there is one (the admin key does not open them)
  and is open otherwise;
* a key travels as `Authorization: Bearer <key>` (the scheme in any case); a refusal is a 401
  `{"error": "Unauthorized"}`.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware

OPEN_PREFIXES = ("/health", "/ready", "/metrics")
ADMIN_OPTIONAL_PATHS = frozenset({"/flush_cache"})

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def bearer_matches(header: str | None, expected: str) -> bool:
    """Whether an Authorization header carries `expected` as a bearer token."""
    if not header:
        return False
    scheme, _, token = header.partition(" ")
    if not _ or scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(token.encode(), expected.encode())


def allowed(
    method: str, path: str, header: str | None, api_key: str | None, admin_api_key: str | None
) -> bool:
    """SGLang's decision for one request."""
    if method == "OPTIONS" or path.startswith(OPEN_PREFIXES):
        return True
    if path in ADMIN_OPTIONAL_PATHS:
        key = admin_api_key or api_key
        return key is None or bearer_matches(header, key)
    return api_key is None or bearer_matches(header, api_key)


def key_middleware(api_key: str | None, admin_api_key: str | None) -> Middleware:
    """An aiohttp middleware applying :func:`allowed` to every request."""

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        header = request.headers.get("Authorization")
        if not allowed(request.method, request.path, header, api_key, admin_api_key):
            return web.json_response({"error": "Unauthorized"}, status=401)
        return await handler(request)

    return check
