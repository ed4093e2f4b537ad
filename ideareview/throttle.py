"""Rate limits of the public forms (log-in, invitation links, sign-up, password reset),
counted in the shared cache.

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
import hashlib
import math
import os
import unicodedata
from collections.abc import Iterator
from typing import Any

from django.core.cache import cache, caches
from django.core.cache.backends.filebased import FileBasedCache
from django.core.cache.backends.redis import RedisCache
from django.http import HttpRequest
from django.utils import timezone

from ideareview.middleware import trusted_proxy

# --------------------------------------------------------------------------- counting


def _rate_window(key: str, window: int) -> tuple[str, str, float]:
    """The current and the previous fixed window's cache keys for `key`, and how far
    into the current window we are (0 to 1)."""
    digest = hashlib.sha256(key.encode()).hexdigest()
    now = timezone.now().timestamp()
    index = int(now) // window
    return (
        f"ratelimit:{digest}:{index}",
        f"ratelimit:{digest}:{index - 1}",
        (now - index * window) / window,
    )


def _rate_over(previous: int, current: int, fraction: float, limit: float) -> bool:
    # A sliding-window estimate: the previous window's attempts count in proportion to
    # how much of it still lies within one window of now. An address that reached the
    # limit in the previous window stays blocked through the current one, so neither a
    # window boundary nor a burst split across it lets more attempts through.
    # Rounded up, so an attempt counts in full until its share has slid out.
    return previous >= limit or math.ceil(previous * (1 - fraction)) + current >= limit


def rate_limit_hit(key: str, *, limit: int, window: int) -> bool:
    """Count one attempt under `key`; True when the caller is over `limit` per `window` s.

    Counted in the default cache, in fixed windows weighed as a sliding window (see
    `_rate_over`); a lock-out lasts between one and two windows. Good enough to slow
    password guessing and token probing; not a substitute for a proxy's limits at scale.
    """
    bucket, previous_bucket, fraction = _rate_window(key, window)
    # Buckets outlive their window by one more: the next window still weighs them.
    ttl = 2 * window + 5
    if cache.add(bucket, 1, timeout=ttl):
        count = 1
    else:
        try:
            count = cache.incr(bucket)
        except ValueError:  # expired between add and incr
            cache.set(bucket, 1, timeout=ttl)
            count = 1
        # Caches without a native increment (file, database) re-store the value with
        # their default timeout; put the bucket's own lifetime back.
        cache.touch(bucket, ttl)
    previous = cache.get(previous_bucket) or 0
    return _rate_over(previous, count, fraction, limit + 1)


def rate_limit_refund(key: str, *, window: int) -> None:
    """Take back one attempt counted under `key` in the current window (a success)."""
    bucket, _, _ = _rate_window(key, window)
    try:
        if cache.decr(bucket) < 0:
            cache.delete(bucket)
    except ValueError:  # expired, or a new window began
        pass


def rate_limited(key: str, *, limit: int, window: int) -> bool:
    """True if `key` is already over its limit, without counting an attempt."""
    bucket, previous_bucket, fraction = _rate_window(key, window)
    got = cache.get_many([bucket, previous_bucket])
    return _rate_over(got.get(previous_bucket, 0), got.get(bucket, 0), fraction, limit)


# --------------------------------------------------------------------------- Redis in one trip

# A refund on Redis: what rate_limit_refund does through the cache's API (a missing bucket
# is left alone, one below zero is deleted), for every key at once.
_REFUND_SCRIPT = """
for _, key in ipairs(KEYS) do
  if redis.call('EXISTS', key) == 1 and redis.call('DECR', key) < 0 then
    redis.call('DEL', key)
  end
end
"""


def _redis() -> RedisCache | None:
    backend = caches["default"]
    return backend if isinstance(backend, RedisCache) else None


def _redis_client(backend: RedisCache) -> Any:
    return backend._cache.get_client(write=True)


def _redis_hits(backend: RedisCache, limits: list[tuple[str, tuple[int, int]]]) -> list[bool]:
    """rate_limit_hit for each (key, (limit, window)), its commands sent to Redis in one
    pipeline rather than three or four round trips a key: INCR makes a missing bucket 1
    (the cache API's add), EXPIRE gives it its lifetime (touch), GET reads the previous
    window's. Each INCR is atomic, so parallel attempts still each get their own count."""
    pipe = _redis_client(backend).pipeline(transaction=False)
    windows = []
    for key, (_limit, window) in limits:
        bucket, previous_bucket, fraction = _rate_window(key, window)
        pipe.incr(backend.make_and_validate_key(bucket))
        pipe.expire(backend.make_and_validate_key(bucket), 2 * window + 5)
        pipe.get(backend.make_and_validate_key(previous_bucket))
        windows.append(fraction)
    replies = pipe.execute()
    over = []
    for n, ((_key, (limit, _window)), fraction) in enumerate(zip(limits, windows, strict=True)):
        count, previous = replies[3 * n], replies[3 * n + 2]
        over.append(_rate_over(int(previous or 0), int(count), fraction, limit + 1))
    return over


def _redis_refunds(backend: RedisCache, refunds: list[tuple[str, int]]) -> None:
    """rate_limit_refund for each (key, window), in one script run."""
    keys = [backend.make_and_validate_key(_rate_window(key, window)[0]) for key, window in refunds]
    _redis_client(backend).eval(_REFUND_SCRIPT, len(keys), *keys)


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
    redis = _redis()
    if redis is not None:
        return any(_redis_hits(redis, _login_keys(address, username)))
    with _counting():
        over = [
            rate_limit_hit(key, limit=limit, window=window)
            for key, (limit, window) in _login_keys(address, username)
        ]
    return any(over)


def login_succeeded(*, address: str, username: str) -> None:
    """A successful login takes its attempt back (people who log in often are not
    guessing)."""
    redis = _redis()
    if redis is not None:
        keys = _login_keys(address, username)
        _redis_refunds(redis, [(key, window) for key, (_limit, window) in keys])
        return
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
