"""Django's Redis cache with one redis-py client per connection pool.

Django's RedisCacheClient makes a new `redis.Redis` for every cache operation, and
redis-py's constructor builds its table of response callbacks (a case-insensitive dict of
every command) each time: more CPU than the command's own round trip. Every request with
a session reads it from the cache (SESSION_ENGINE cached_db), and a login counts and
refunds its attempt under several keys, so that cost was paid on every request and many
times per login (docs/deploy.md, "Load"). A client holds no connection of its own (it takes
one from the pool for each command), so one per pool serves every call; Django keeps a
cache object per thread, so the clients are not shared between threads either.
"""

from __future__ import annotations

from typing import Any

from django.core.cache.backends.redis import RedisCache as DjangoRedisCache
from django.core.cache.backends.redis import RedisCacheClient


class ReusedClientRedisCacheClient(RedisCacheClient):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[int, Any] = {}

    def get_client(self, key: Any = None, *, write: bool = False) -> Any:
        pool = self._get_connection_pool(write)  # type: ignore[attr-defined]
        client = self._clients.get(id(pool))
        if client is None:
            # the pools live as long as this object, so their ids stay theirs
            client = self._clients[id(pool)] = self._client(connection_pool=pool)  # type: ignore[attr-defined]
        return client


class RedisCache(DjangoRedisCache):
    def __init__(self, server: str, params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = ReusedClientRedisCacheClient
