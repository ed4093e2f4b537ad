"""Refresh tests/durations.json from this checkout's recorded test durations.

`make test` records each test's duration in pytest's cache; the scheduler of the xdist
workers (tests/conftest.py) starts the longest tests first. A fresh clone has no cache, so
it reads the committed file instead. Run after a whole `make test` (or both CI passes):
the recorded durations replace the committed ones, and tests whose module is gone are
dropped.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".pytest_cache" / "v" / "ideareview" / "durations"
TARGET = ROOT / "tests" / "durations.json"


def main() -> int:
    if not CACHE.exists():
        print(f"no recorded durations at {CACHE}: run `make test` first", file=sys.stderr)
        return 1
    kept = json.loads(TARGET.read_text("utf-8")) if TARGET.exists() else {}
    kept.update(json.loads(CACHE.read_text("utf-8")))
    kept = {
        nodeid: round(seconds, 1)
        for nodeid, seconds in sorted(kept.items())
        if (ROOT / nodeid.split("::", 1)[0]).exists()
    }
    TARGET.write_text(json.dumps(kept, indent=0, sort_keys=True, ensure_ascii=False) + "\n")
    print(f"{TARGET.relative_to(ROOT)}: {len(kept)} tests")
    return 0


if __name__ == "__main__":
    sys.exit(main())
