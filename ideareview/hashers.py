"""The password hasher new passwords get: Argon2id with the parameters of OWASP's
password storage guidance (19 MiB of memory, 2 passes, 1 lane) instead of Django's
(100 MiB, 2 passes, 8 lanes), computed at a lower CPU priority than the server's other
work.

Why not Django's parameters: on a small server a login's hash is paid in CPU while every
other request waits for it, and Django's Argon2 parameters cost nearly as much CPU as its
PBKDF2 (docs/measurements.md has both, measured here), so a morning's burst of reviewer
logins would still starve autosaves. OWASP lists these parameters as one of the
equivalent minimum configurations for Argon2id; the memory they need per guess is what
makes guessing on GPUs dear, and they need 19 MiB per login in flight instead of 100.

Why a lower priority: even at these parameters the hash is most of a login's CPU, and a
burst of logins (a study's invitation going out) can keep every core busy. A reviewer
who is typing should not wait for someone else's password check, while the one logging
in hardly notices a few more milliseconds. So each check runs on a small pool of threads
whose scheduling priority is lowered by `settings.PASSWORD_HASH_NICENESS` (on Linux the
nice value is a property of each thread, and argon2-cffi releases the GIL while it
hashes): when the cores are free it runs at full speed, when they are busy the server's
other requests go first. The pool is made per process (a forked worker gets its own) and remade if the setting
changes.
On another system, or with the setting at 0, the check runs in the request's thread.

A hash made with other parameters (Django's, or older ones) still verifies, since each
hash records its own, and Django re-hashes it with these at the user's next login.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from django.conf import settings
from django.contrib.auth.hashers import Argon2PasswordHasher

T = TypeVar("T")

POOL_THREADS = 4
"""Checks one process runs at once; more wait their turn in the pool's queue (a login
is rarely more than one per worker thread at a time)."""

_lock = threading.Lock()
_pool: tuple[tuple[int, int], ThreadPoolExecutor] | None = None


def _lower_own_priority(niceness: int) -> None:
    """Raise the calling thread's nice value by `niceness` (never above 19). Raising it
    needs no privilege; an error (a container that forbids it) leaves it as it was."""
    tid = threading.get_native_id()
    try:
        current = os.getpriority(os.PRIO_PROCESS, tid)
        os.setpriority(os.PRIO_PROCESS, tid, min(19, current + niceness))
    except OSError:
        pass


def _low_priority_pool(niceness: int) -> ThreadPoolExecutor:
    global _pool
    with _lock:
        key = (os.getpid(), niceness)
        if _pool is None or _pool[0] != key:
            if _pool is not None and _pool[0][0] == os.getpid():
                _pool[1].shutdown(wait=False)
            executor = ThreadPoolExecutor(
                max_workers=POOL_THREADS,
                thread_name_prefix="password-hash",
                initializer=_lower_own_priority,
                initargs=(niceness,),
            )
            _pool = (key, executor)
        return _pool[1]


def at_low_priority(function: Callable[..., T], *args: Any) -> T:
    """`function(*args)`, run on the low-priority pool where threads have their own nice
    value (Linux) and the setting asks for it, else here."""
    niceness = settings.PASSWORD_HASH_NICENESS
    if niceness <= 0 or not sys.platform.startswith("linux"):
        return function(*args)
    return _low_priority_pool(niceness).submit(function, *args).result()


class Argon2idHasher(Argon2PasswordHasher):
    time_cost = 2
    memory_cost = 19 * 1024  # KiB
    parallelism = 1

    def encode(self, password: str, salt: str) -> str:
        return at_low_priority(super().encode, password, salt)

    def verify(self, password: str, encoded: str) -> bool:
        return at_low_priority(super().verify, password, encoded)
