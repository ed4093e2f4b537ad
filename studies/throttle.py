"""Login and invitation-link limits, counted in the shared cache.

The cache is the project's default cache: Redis when CACHE_URL names it (shared by every
machine), a file cache under var/ otherwise (shared by the processes of one machine), so
three gunicorn workers count one limit, not three. The client's address is REMOTE_ADDR
unless that is one of IDEAREVIEW_TRUSTED_PROXIES: only then is X-Forwarded-For read, from
the right, skipping our own proxies, so a reviewer cannot pick the address they are
counted under and everyone behind the proxy is not counted as one.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import unicodedata
from collections.abc import Iterator

from django.core.cache import caches
from django.core.cache.backends.filebased import FileBasedCache
from django.http import HttpRequest

from ideareview.middleware import trusted_proxy

from .recruitment import rate_limit_hit, rate_limit_refund, rate_limited

# (attempts, window in seconds)
LOGIN_PAIR_LIMIT = (10, 300)  # one address trying one account
LOGIN_ACCOUNT_LIMIT = (30, 900)  # one account from anywhere (guessing spread over addresses)
LOGIN_ADDRESS_LIMIT = (50, 300)  # one address trying many accounts
TOKEN_LIMIT = (20, 600)  # failed invitation links per address


def client_address(request: HttpRequest) -> str:
    remote = request.META.get("REMOTE_ADDR", "")
    if not trusted_proxy(remote):
        return remote
    hops = [h.strip() for h in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
    hops = [h for h in hops if h]
    for hop in reversed(hops):
        if not trusted_proxy(hop):
            return hop
    return hops[0] if hops else remote


def login_identity(username: str) -> str:
    """The account a login names, as authentication reads it: stripped and NFKC-normalized
    (Django's UsernameField), then case-folded, so `ｂｆ２`, `bf２`, `ᵇf2` and `BF2` count
    as `bf2`."""
    once = unicodedata.normalize("NFKC", username.strip())
    return unicodedata.normalize("NFKC", once.casefold())


@contextlib.contextmanager
def _counting() -> Iterator[None]:
    """Counting in a cache without atomic add and increment (the file cache reads and
    rewrites a file) is serialized by a lock file beside it; Redis (INCR, SET NX) and the
    local-memory cache (a lock of its own) are atomic already."""
    backend = caches["default"]
    if not isinstance(backend, FileBasedCache):
        yield
        return
    directory = str(backend._dir)  # type: ignore[attr-defined]
    os.makedirs(directory, mode=0o700, exist_ok=True)
    fd = os.open(os.path.join(directory, ".ratelimit.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _login_keys(address: str, username: str) -> list[tuple[str, tuple[int, int]]]:
    username = login_identity(username)
    return [
        (f"login:{address}:{username}", LOGIN_PAIR_LIMIT),
        (f"login-account:{username}", LOGIN_ACCOUNT_LIMIT),
        (f"login:{address}", LOGIN_ADDRESS_LIMIT),
    ]


def login_blocked(*, address: str, username: str) -> bool:
    """True when this address or this account is over a limit (nothing is counted)."""
    return any(
        rate_limited(key, limit=limit, window=window)
        for key, (limit, window) in _login_keys(address, username)
    )


def login_attempt(*, address: str, username: str) -> bool:
    """Count this attempt BEFORE the password is checked, atomically; True when it is over
    a limit (then the password must not be checked). Parallel attempts each get their own
    count, so no more than the limit reach the password check."""
    with _counting():
        over = [
            rate_limit_hit(key, limit=limit, window=window)
            for key, (limit, window) in _login_keys(address, username)
        ]
    return any(over)


def login_succeeded(*, address: str, username: str) -> None:
    """A successful login takes its attempt back (people who log in often are not
    guessing)."""
    with _counting():
        for key, (_limit, window) in _login_keys(address, username):
            rate_limit_refund(key, window=window)


def login_failed(*, address: str, username: str) -> None:
    """Count a failed attempt (for callers that did not count it before)."""
    with _counting():
        for key, (limit, window) in _login_keys(address, username):
            rate_limit_hit(key, limit=limit, window=window)


def token_blocked(*, address: str) -> bool:
    return rate_limited(f"token:{address}", limit=TOKEN_LIMIT[0], window=TOKEN_LIMIT[1])


def token_failed(*, address: str) -> None:
    rate_limit_hit(f"token:{address}", limit=TOKEN_LIMIT[0], window=TOKEN_LIMIT[1])
