"""Celery beat that sends its schedule from one process only, however many run.

Every machine that runs `make serve` starts a beat, so on several machines several beats
run. Each one's scheduler (`LockedScheduler`, settings.CELERY_BEAT_SCHEDULER) sends due
tasks only while it holds the installation's beat lock; the others stand by and try to
take the lock at every tick. The lock is one the operating system or the database drops
with its holder's process or connection, so a beat killed by SIGKILL, or a machine that
dies, hands the schedule over at the next try of a standby, with no timeout to tune:

- on PostgreSQL (several machines), a session-level advisory lock on the beat's own
  database connection, checked again at every tick (a connection that broke and was made
  again has lost it);
- on SQLite (one machine), an exclusive `flock` on `beat.lock` under VAR_DIR.

A standby remembers each entry as last run at its latest failed try. When it takes over,
what fell due since that try is sent: what the old holder could not send before it died,
and at most what it sent in its last `BEAT_LOCK_POLL_SECONDS`, which a takeover may send
again (a daily mail twice, in that short window only).
"""

from __future__ import annotations

import fcntl
import logging
import os
import zlib
from typing import Any

from celery.beat import PersistentScheduler
from django.conf import settings
from django.db import DatabaseError, connection

log = logging.getLogger(__name__)

# Advisory lock keys share one number space per database: two numbers that name this lock.
LOCK_CLASS = zlib.crc32(b"ideareview") & 0x7FFFFFFF
LOCK_OBJECT = zlib.crc32(b"celery beat") & 0x7FFFFFFF


class BeatLock:
    """The installation's one beat lock, held by this process or not."""

    def __init__(self) -> None:
        self._file: int | None = None

    def held(self) -> bool:
        """Whether this process holds the lock, taking it when it is free."""
        try:
            if connection.vendor == "postgresql":
                return self._postgresql()
            return self._file_lock()
        except DatabaseError as exc:
            # The database is away: hold nothing until it answers again (the lock, tied
            # to the broken connection, is gone for every beat alike).
            log.warning("beat lock: the database did not answer (%s)", exc)
            connection.close()
            return False

    def _postgresql(self) -> bool:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted"
                " AND pid = pg_backend_pid() AND classid = %s AND objid = %s AND objsubid = 2",
                [LOCK_CLASS, LOCK_OBJECT],
            )
            if cursor.fetchone():
                return True
            cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [LOCK_CLASS, LOCK_OBJECT])
            return bool(cursor.fetchone()[0])

    def _file_lock(self) -> bool:
        if self._file is not None:
            return True
        fd = os.open(settings.VAR_DIR / "beat.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._file = fd
        return True


class LockedScheduler(PersistentScheduler):
    """Celery's file-backed scheduler, sending only while this beat holds the lock."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.lock = BeatLock()
        self.holding: bool | None = None  # None: not tried yet
        super().__init__(*args, **kwargs)

    def tick(self, *args: Any, **kwargs: Any) -> float:
        held = self.lock.held()
        if held != self.holding:
            if held:
                log.info("beat: holds the beat lock; sending the schedule from %s", os.getpid())
                if self.holding is False:
                    self._heap = None  # rebuilt from the standby's last-run times
            else:
                log.info("beat: another beat holds the beat lock; standing by")
            self.holding = held
        if not held:
            now = self.app.now()
            for entry in self.schedule.values():
                entry.last_run_at = now
            return min(settings.BEAT_LOCK_POLL_SECONDS, self.max_interval)
        return super().tick(*args, **kwargs)
