"""A report build's scratch folder survives its worker being SIGKILLed (no cleanup code
runs); the next build on the machine removes it, and leaves alone the folders of live
processes and of other machines."""

from __future__ import annotations

import os
import signal
import time

from studies.work_folders import _host, work_folder, work_folders_sweep


def test_the_folder_of_a_killed_process_goes_at_the_next_build(settings, tmp_path):
    settings.JOB_WORK_ROOT = tmp_path / "work"
    ready_r, ready_w = os.pipe()
    child = os.fork()
    if child == 0:  # the "worker": makes its folder, writes into it, then waits to die
        try:
            with work_folder("report") as out:
                (out / "report.html").write_text("half written")
                os.write(ready_w, b"1")
                time.sleep(60)
        finally:
            os._exit(0)
    assert os.read(ready_r, 1) == b"1"
    os.kill(child, signal.SIGKILL)
    os.waitpid(child, 0)
    (left,) = list((tmp_path / "work").iterdir())
    assert (left / "report.html").exists() and f"-{child}-report-" in left.name

    live = tmp_path / "work" / f"{_host()}-{os.getpid()}-report-live"
    elsewhere = tmp_path / "work" / f"otherhost-{child}-report-x"
    live.mkdir()
    elsewhere.mkdir()
    with work_folder("report") as mine:
        assert not left.exists()
        assert live.exists() and elsewhere.exists() and mine.exists()
    assert not mine.exists()
    assert work_folders_sweep(tmp_path / "work") == []
