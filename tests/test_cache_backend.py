"""ideareview/cache.py: Django's Redis cache, with one redis-py client per pool."""

import threading
import uuid

import pytest
import redis

from ideareview.cache import RedisCache
from tests.conftest import limits_redis_url


@pytest.fixture
def cache():
    url = limits_redis_url()
    if url is None:
        pytest.skip("no Redis on 127.0.0.1:6379")
    # a prefix of this test's own: the database is shared with other test processes
    return RedisCache(url, {"KEY_PREFIX": f"cache-test-{uuid.uuid4().hex}", "TIMEOUT": 60})


def test_it_answers_like_djangos_redis_cache(cache):
    assert cache.get("a") is None
    cache.set("a", {"x": 1})
    assert cache.get("a") == {"x": 1}
    assert cache.add("a", 2) is False and cache.add("b", 2) is True
    assert cache.incr("b") == 3
    assert cache.get_many(["a", "b", "c"]) == {"a": {"x": 1}, "b": 3}
    cache.delete("a")
    assert cache.get("a", "gone") == "gone"


def test_one_client_serves_every_operation(cache, monkeypatch):
    made = []
    original = redis.Redis.__init__

    def counting(self, *args, **kwargs):
        made.append(self)
        original(self, *args, **kwargs)

    monkeypatch.setattr(redis.Redis, "__init__", counting)
    for n in range(20):
        cache.set(f"k{n}", n)
        assert cache.get(f"k{n}") == n
    cache.incr("k1")
    assert len(made) == 1  # Django's own client makes one per operation: 41 here


def test_threads_sharing_one_cache_object_get_their_own_answers(cache):
    # Django gives each thread its own cache object; this checks the stronger case, one
    # object (and so one client) used by several threads at once.
    errors = []

    def work(t):
        try:
            for n in range(50):
                cache.set(f"t{t}-{n}", (t, n))
                assert cache.get(f"t{t}-{n}") == (t, n)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
