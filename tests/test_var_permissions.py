"""What the server writes under var/ (the SQLite database, the secret key, the file
broker and cache, reports) is readable by its own user only, whatever the shell's umask."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_files_under_var_are_created_owner_only(tmp_path):
    var = tmp_path / "var"
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "DATABASE_", "CACHE_", "REDIS_", "CELERY_", "IDEAREVIEW_"))
    }
    code = (
        "import os; os.umask(0o022)\n"  # a permissive shell, as the issue found it
        "import django; django.setup()\n"
        # a write to the database, which creates its file (and journal): what a migration
        # does first, without its seconds of work
        "from django.db import connection\n"
        "with connection.cursor() as c: c.execute('CREATE TABLE probe (x int)');"
        " c.execute('INSERT INTO probe VALUES (1)')\n"
        "from django.core.cache import cache; cache.set('k', 1)\n"
        "from django.conf import settings; settings.REPORTS_ROOT.mkdir(parents=True)\n"
        "(settings.REPORTS_ROOT / 'r.txt').write_text('x')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={
            **env,
            "IDEAREVIEW_VAR_DIR": str(var),
            "DJANGO_SETTINGS_MODULE": "ideareview.settings",
        },
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    seen = [var, *var.rglob("*")]
    assert var / "ideareview.sqlite3" in seen and var / "secret_key" in seen
    assert (var / "broker" / "out") in seen and (var / "reports" / "r.txt") in seen
    loose = [
        (str(p.relative_to(tmp_path)), oct(stat.S_IMODE(p.stat().st_mode)))
        for p in seen
        if stat.S_IMODE(p.stat().st_mode) & 0o077
    ]
    assert loose == []
