"""The beat lock (ideareview/beat.py) without a database: on SQLite an exclusive flock on
var/beat.lock, which a second beat cannot take while the first holds it, and takes as soon
as the first is gone. The PostgreSQL advisory lock is run with real beats in
test_several_machines."""

from __future__ import annotations

import os

from ideareview.beat import BeatLock


def test_a_second_beat_cannot_take_the_file_lock_until_the_first_lets_it_go(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    first, second = BeatLock(), BeatLock()
    assert first._file_lock() is True
    assert first._file_lock() is True  # still its own
    assert second._file_lock() is False
    assert first._file is not None
    os.close(first._file)  # what the kernel does when the first beat's process dies
    assert second._file_lock() is True
    assert (tmp_path / "beat.lock").stat().st_mode & 0o077 == 0
