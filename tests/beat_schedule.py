"""The Celery app with one more beat entry, due every second: `celery -A tests.beat_schedule
beat` in the several-machines test, so two beats can be seen to send from one of them."""

from __future__ import annotations

from ideareview.celery import app

app.conf.beat_schedule = {
    **app.conf.beat_schedule,
    "test-tick": {"task": "tests.jobtasks.beat_tick", "schedule": 1.0},
}

__all__ = ["app"]
