"""Bearer tokens for the worker's data endpoints (/runs, /metrics), and who each one reads for.

`RB_WEB_TOKEN` is the operator's token: it reads every run and every metric. In multi-tenant
mode each tenant may have a token of its own (`RB_TENANT_TOKEN_<TENANT>`), which reads only
that tenant's runs, steps and metrics (`Reader.tenant`; the views apply it). Liveness and
readiness (/health, /ready) stay open: probes carry no data and orchestrators rarely hold
secrets. Every endpoint is GET-only (Faust answers 405 to other methods), and forwarded run
queries keep the caller's Authorization header, so the worker owning the run checks it again.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

Handler = Callable[..., Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class Reader:
    """Who a request reads for: `tenant` None is the operator (or no token is set), who reads
    everything; otherwise that tenant's runs and metrics only."""

    tenant: str | None = None

    def may_read(self, org: str) -> bool:
        return self.tenant is None or org == self.tenant


OPERATOR = Reader()


def _digest(token: bytes) -> bytes:
    # Compared as digests: every comparison is of 32 bytes, so neither a token's length nor
    # how much of it a guess got right shows in the time an answer takes.
    return hashlib.sha256(token).digest()


def credentials(header: str | None) -> bytes | None:
    """The bearer credentials of an Authorization header, as bytes, or None. The scheme is
    case-insensitive (RFC 9110); any header, whatever its bytes, gets an answer (never an
    exception: an unauthenticated client must not be able to cause a 500 and a logged
    traceback per request)."""
    if not header:
        return None
    scheme, _, given = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    # aiohttp hands header bytes over as text (non-UTF-8 bytes as surrogate escapes): compare
    # bytes; text that is not even that cannot be a token.
    try:
        return given.strip().encode("utf-8", "surrogateescape")
    except UnicodeError:
        return None


class WebAuth:
    """The operator's token and the tenants' tokens; `reader` says whose a request is."""

    def __init__(self, operator: str = "", tenants: Mapping[str, str] | None = None) -> None:
        tokens = {name: tok for name, tok in (tenants or {}).items() if tok}
        if tokens and not operator:
            raise ValueError("tenant tokens need an operator token (RB_WEB_TOKEN)")
        self.open = not operator
        self._known: list[tuple[bytes, Reader]] = []
        if operator:
            self._known.append((_digest(operator.encode("utf-8")), OPERATOR))
        self._known += [(_digest(tok.encode("utf-8")), Reader(name)) for name, tok in tokens.items()]

    def reader(self, header: str | None) -> Reader | None:
        """Whose the request is (None: no known token). Every known token is compared, in
        constant time, whichever matches."""
        if self.open:
            return OPERATOR
        given = credentials(header)
        if given is None:
            return None
        digest = _digest(given)
        found: Reader | None = None
        for known, who in self._known:
            if hmac.compare_digest(digest, known):
                found = who
        return found


def authorized(token: str, header: str | None) -> bool:
    """Whether `header` carries the token (always, without one)."""
    return WebAuth(token).reader(header) is not None


def guard(auth: WebAuth) -> Callable[[Handler], Handler]:
    """A view decorator answering 401 unless the request carries a known token; the view is
    called with `reader=` (whose request it is)."""

    def decorate(fun: Handler) -> Handler:
        @functools.wraps(fun)
        async def guarded(view: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
            who = auth.reader(request.headers.get("Authorization"))
            if who is None:
                return view.json(
                    {
                        "error": "unauthorized: send Authorization: Bearer <RB_WEB_TOKEN or your tenant's token>"
                    },
                    status=401,
                    headers={"WWW-Authenticate": 'Bearer realm="rb-streams"'},
                )
            return await fun(view, request, *args, reader=who, **kwargs)

        return guarded

    return decorate
