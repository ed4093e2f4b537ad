#!/usr/bin/env python3
"""List the functions longer than a limit (120 lines by default), longest first.

The numerical kernels (the sparse mixed-model engine, the assignment program and the
ordinal model) are left out: their length follows the algorithm. Everything else past
the limit is assembly code that should be split into named pieces.

    python scripts/long_functions.py [--limit N] [paths...]

Exits 1 when any function is over the limit, so it can gate CI once the list is empty.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("ideareview", "llm", "accounts", "studies", "judging")
KERNELS = {
    "studies/analysis/lmm_sparse.py",
    "studies/protocol/assignment.py",
    "studies/analysis/ordinal.py",
}


def long_functions(path: Path, limit: int) -> list[tuple[int, str, int]]:
    """(length, qualified name, first line) of each function in `path` over `limit` lines.

    A function's length runs from its `def` (decorators excluded) to its last line, nested
    functions included; nested functions are listed on their own as well."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[int, str, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    length = (child.end_lineno or child.lineno) - child.lineno + 1
                    if length > limit:
                        found.append((length, name, child.lineno))
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def python_files(paths: list[str]) -> list[Path]:
    roots = [ROOT / p for p in paths] if paths else [ROOT / p for p in PACKAGES]
    files: list[Path] = []
    for root in roots:
        candidates = [root] if root.is_file() else sorted(root.rglob("*.py"))
        files += [f for f in candidates if "migrations" not in f.parts]
    return [f for f in files if f.relative_to(ROOT).as_posix() not in KERNELS]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=120, help="longest allowed (lines)")
    parser.add_argument("paths", nargs="*", help="files or folders (default: the apps)")
    args = parser.parse_args(argv)
    rows = [
        (length, f"{path.relative_to(ROOT).as_posix()}:{line}", name)
        for path in python_files(args.paths)
        for length, name, line in long_functions(path, args.limit)
    ]
    for length, where, name in sorted(rows, reverse=True):
        print(f"{length:5d}  {where}  {name}")
    print(f"{len(rows)} function(s) over {args.limit} lines outside the numerical kernels")
    return 1 if rows else 0


if __name__ == "__main__":
    sys.exit(main())
