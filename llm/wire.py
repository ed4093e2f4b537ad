"""What the client puts on the wire beside the messages, with no Django: the judge
methods' prompts hash their messages the same way."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

METHOD_HEADER = "X-Ideareview-Method"
"""Request header that names the kind of request: the prompt template's name (e.g.
`pairwise`, `ligbench_comparison`). The client sends it beside the messages, outside the
cache key; the local test server answers by it."""


def prompt_hash(messages: Sequence[Mapping[str, Any]]) -> str:
    """SHA-256 of the messages as canonical JSON (sorted keys, no spaces, UTF-8)."""
    canonical = json.dumps(
        [dict(m) for m in messages], sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()
