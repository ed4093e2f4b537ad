"""Refuse to start a server whose processes could open more database connections than
PostgreSQL allows ("too many clients" under load otherwise).

Each gunicorn thread holds at most one connection (or, with DATABASE_POOL_MAX_SIZE, each
gunicorn process at most the pool's size), each Celery worker process one, beat one.
Several machines share one database: pass --machines N to count them all.
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def budget(*, workers: int, threads: int, pool: int, concurrency: int, machines: int) -> int:
    per_web_process = min(pool, threads) if pool else threads
    # worker processes + the worker's main process + beat + a manage.py or two
    return machines * (workers * per_web_process + concurrency + 1 + 1) + 2


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--worker-concurrency", type=int, default=2)
    parser.add_argument("--machines", type=int, default=1)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ideareview.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.db import connection

    if connection.vendor != "postgresql":
        return 0
    conf = runpy.run_path(str(ROOT / "ideareview" / "gunicorn.conf.py"))
    pool = settings.DATABASES["default"].get("OPTIONS", {}).get("pool", {}).get("max_size", 0)
    need = budget(
        workers=conf["workers"],
        threads=conf["threads"],
        pool=pool,
        concurrency=args.worker_concurrency,
        machines=args.machines,
    )
    with connection.cursor() as cursor:
        cursor.execute("SHOW max_connections")
        limit = int(cursor.fetchone()[0])
        cursor.execute("SHOW superuser_reserved_connections")
        limit -= int(cursor.fetchone()[0])
    print(
        f"database connections: at most {need} of {limit} "
        f"({conf['workers']} web workers x {conf['threads']} threads"
        f"{f', pool {pool}' if pool else ''}; {args.worker_concurrency} Celery processes)"
    )
    if need > limit:
        print(
            "too many: lower IDEAREVIEW_WEB_WORKERS / IDEAREVIEW_WEB_THREADS, set "
            "DATABASE_POOL_MAX_SIZE, or raise PostgreSQL's max_connections",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
