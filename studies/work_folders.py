"""Local scratch folders for jobs that need real paths (matplotlib, chromium and the zip
writer write files, which are then saved into a storage).

A folder is removed when its job ends, but a worker killed by SIGKILL (or the machine's
OOM killer) never runs that cleanup. So each folder is made under JOB_WORK_ROOT with the
host and process id of its maker in its name, and every new folder first removes the
folders of this host whose process no longer exists: what a killed build left behind goes
at the next build on that machine. Folders of other hosts (a shared VAR_DIR) are left to
their own host.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings

from .jobs import process_alive


def _host() -> str:
    return socket.gethostname().replace("-", "_") or "host"


def work_folders_sweep(root: Path | None = None) -> list[Path]:
    """Remove this host's scratch folders whose process is gone; return what was removed."""
    root = Path(root or settings.JOB_WORK_ROOT)
    if not root.is_dir():
        return []
    removed = []
    for folder in root.iterdir():
        host, _, rest = folder.name.partition("-")
        pid = rest.split("-", 1)[0]
        if host != _host() or not pid.isdigit() or process_alive(int(pid)):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed


@contextmanager
def work_folder(kind: str) -> Iterator[Path]:
    """A fresh scratch folder for one job of `kind`, removed when the block ends."""
    root = Path(settings.JOB_WORK_ROOT)
    root.mkdir(parents=True, exist_ok=True)
    work_folders_sweep(root)
    folder = Path(tempfile.mkdtemp(prefix=f"{_host()}-{os.getpid()}-{kind}-", dir=root))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
