"""The audit log as a hash chain: each entry's hash covers its content and the hash of
the entry before it, so editing, removing or inserting an entry anywhere but at the end
changes every hash after it, and a head hash printed elsewhere (a report, a package)
pins the end too.

An entry's content is its position in its chain (``seq``, from 1), the verb, the detail
(canonical JSON), the time (ISO 8601, microseconds, UTC) and the actor's name as it was
when the entry was written; names rather than database ids, so a study exported and
imported elsewhere keeps a chain that verifies.

Pure module: no Django imports.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

#: The hash "before" the first entry of every chain.
GENESIS = "0" * 64


def _when(at: datetime) -> str:
    if at.tzinfo is None:
        raise ValueError("audit times must be timezone-aware")
    return at.astimezone(UTC).isoformat(timespec="microseconds")


def entry_hash(
    *, prev: str, seq: int, verb: str, detail: Mapping[str, Any], at: datetime, actor: str
) -> str:
    """SHA-256 over the previous hash and the entry's canonical JSON."""
    body = json.dumps(
        {"seq": seq, "verb": verb, "detail": detail, "at": _when(at), "actor": actor},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        default=str,
    )
    return hashlib.sha256(f"{prev}\n{body}".encode()).hexdigest()


@dataclass(frozen=True)
class ChainCheck:
    """The outcome of a check: ``ok``, the number of entries, the head (last hash), and
    for a broken chain the first entry that does not verify and why."""

    ok: bool
    entries: int
    head: str
    broken_at: int | None = None  # seq of the first bad entry
    problem: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "entries": self.entries,
            "head": self.head,
            "broken_at": self.broken_at,
            "problem": self.problem,
        }


def chain_verify(entries: Iterable[Mapping[str, Any]]) -> ChainCheck:
    """Check entries given in ``seq`` order, each a mapping with seq, verb, detail, at,
    actor, prev_hash and hash."""
    prev, n = GENESIS, 0
    for n, e in enumerate(entries, start=1):
        if e["seq"] != n:
            return ChainCheck(False, n, prev, e["seq"], f"entry {n} is missing (found {e['seq']})")
        if e["prev_hash"] != prev:
            return ChainCheck(False, n, prev, n, f"entry {n} does not follow entry {n - 1}")
        expected = entry_hash(
            prev=prev, seq=n, verb=e["verb"], detail=e["detail"], at=e["at"], actor=e["actor"]
        )
        if e["hash"] != expected:
            return ChainCheck(False, n, prev, n, f"entry {n} was changed after it was written")
        prev = e["hash"]
    return ChainCheck(True, n, prev)
