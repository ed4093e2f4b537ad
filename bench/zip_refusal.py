"""How long refusing a zip bomb of Markdown ideas takes: 50 files of about 2 MB each
(100 MB of text) deflated to a few hundred KB, read as an idea upload. The archive is
refused from its directory (compression ratio, per-file size matched to what one idea may
hold) before any member is decompressed; the target is well under a second.

    python bench/zip_refusal.py [--files 50] [--file-bytes 1990000] [--repeat 5] [--smoke]

Prints the archive's size, the median and worst wall time of the refusal, and its message.
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from studies.protocol.ideafiles import read_batch  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=50)
    parser.add_argument("--file-bytes", type=int, default=1_990_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--smoke", action="store_true", help="5 files of 300 KB, once (CI: the path still runs)"
    )
    args = parser.parse_args()
    if args.smoke:
        args.files, args.file_bytes, args.repeat = 5, 300_000, 1
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for i in range(args.files):
            z.writestr(f"idea-{i}.md", b"---\nid: x\n---\n" + b"a" * args.file_bytes)
    data = buffer.getvalue()
    times = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        batch = read_batch("bomb.zip", data)
        times.append(time.perf_counter() - started)
    print(
        f"zip of {args.files} x {args.file_bytes:,} bytes: {len(data):,} bytes; refused in "
        f"median {statistics.median(times) * 1000:.1f} ms, worst {max(times) * 1000:.1f} ms"
    )
    print("message:", batch.problems[0].message if batch.problems else "(none: not refused)")
    if not batch.problems:
        sys.exit("the zip bomb was not refused")


if __name__ == "__main__":
    main()
