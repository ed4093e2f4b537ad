"""JSON schemas of the answers the methods ask for, for endpoints with structured outputs.

Each schema describes one answer shape the method's strict parser (`parsing.py`) already
accepts, so an answer under the schema and one without it are read by the same code: the
schema only makes a conforming answer likelier, it never replaces the parser. The
schemas keep to the subset OpenAI's strict mode takes: every object lists all its
properties as required and allows no others.

Methods whose answers are not a JSON object (LigBench's reasoned verdicts and initial
scores end in a marked line after free text) have no schema and are asked as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .parsing import FORMALISATION_KEYS

__all__ = [
    "absolute_schema",
    "form_scores_schema",
    "formalisation_schema",
    "pairwise_schema",
    "response_format",
    "schema_for_prompt",
]


def _object(properties: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": dict(properties),
        "required": list(properties),
        "additionalProperties": False,
    }


def _score(low: int, high: int) -> dict[str, Any]:
    return _object(
        {
            "score": {"type": "integer", "minimum": int(low), "maximum": int(high)},
            "rationale": {"type": "string"},
        }
    )


def form_scores_schema(ranges: Mapping[str, tuple[int, int]]) -> dict[str, Any]:
    """Direct scoring: one {score, rationale} object per metric key of the form."""
    return _object({key: _score(low, high) for key, (low, high) in ranges.items()})


def absolute_schema(low: int, high: int) -> dict[str, Any]:
    """One absolute score with its rationale."""
    return _score(low, high)


def pairwise_schema(*, ties: bool = True) -> dict[str, Any]:
    """A pairwise verdict: {"winner": "A" | "B" (| "tie"), "rationale": …}."""
    return _object(
        {
            "winner": {"type": "string", "enum": ["A", "B", "tie"] if ties else ["A", "B"]},
            "rationale": {"type": "string"},
        }
    )


def formalisation_schema() -> dict[str, Any]:
    """LigBench's four-part restatement of an idea."""
    return _object(
        {
            key: {"type": "array", "items": {"type": "string"}}
            if key == "innovative_methods"
            else {"type": "string"}
            for key in FORMALISATION_KEYS
        }
    )


def schema_for_prompt(prompt_name: str) -> dict[str, Any] | None:
    """The schema of a prompt whose answer shape does not depend on the study's form
    (None: no schema, or one the caller must build from its own ranges)."""
    if prompt_name == "pairwise":
        return pairwise_schema(ties=True)
    if prompt_name == "swiss":
        return pairwise_schema(ties=False)
    if prompt_name == "ligbench_formalisation":
        return formalisation_schema()
    return None


def response_format(name: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    """The chat completions `response_format` asking for answers under `schema`."""
    return {
        "type": "json_schema",
        "json_schema": {"name": name, "strict": True, "schema": dict(schema)},
    }
