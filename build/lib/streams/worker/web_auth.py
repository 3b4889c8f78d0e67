"""Optional bearer token for the worker's data endpoints (/runs, /metrics).

Liveness and readiness (/health, /ready) stay open: probes carry no data and orchestrators
rarely hold secrets. Every endpoint is GET-only (Faust answers 405 to other methods), and
forwarded run queries keep the caller's Authorization header, so one token serves a cluster.
"""

from __future__ import annotations

import functools
import hmac
from collections.abc import Awaitable, Callable
from typing import Any

Handler = Callable[..., Awaitable[Any]]


def authorized(token: str, header: str | None) -> bool:
    """Whether `header` carries the token. The scheme is case-insensitive (RFC 9110); any
    header, whatever its bytes, gets an answer (never an exception: an unauthenticated client
    must not be able to cause a 500 and a logged traceback per request)."""
    if not token:
        return True
    if not header:
        return False
    scheme, _, credentials = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    # aiohttp hands header bytes over as text (non-UTF-8 bytes as surrogate escapes): compare
    # bytes; text that is not even that cannot be the token.
    try:
        given = credentials.strip().encode("utf-8", "surrogateescape")
    except UnicodeError:
        return False
    return hmac.compare_digest(given, token.encode("utf-8"))


def bearer_guard(token: str) -> Callable[[Handler], Handler]:
    """A view decorator answering 401 unless the request carries the token (no-op without one)."""

    def decorate(fun: Handler) -> Handler:
        if not token:
            return fun

        @functools.wraps(fun)
        async def guarded(view: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
            if not authorized(token, request.headers.get("Authorization")):
                return view.json(
                    {"error": "unauthorized: send Authorization: Bearer <RB_WEB_TOKEN>"},
                    status=401,
                    headers={"WWW-Authenticate": 'Bearer realm="rb-streams"'},
                )
            return await fun(view, request, *args, **kwargs)

        return guarded

    return decorate
