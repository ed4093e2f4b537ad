"""Words in reviewer-visible study text that name where ideas come from.

Blinding fails quietly when the study's own title says what it compares: a study called
"Human vs AI ideas" puts the comparison in every invitation, reminder and reviewer page.
:func:`source_mentions` finds, in the texts a study shows reviewers, the study's condition
names (keys and labels) and the usual words for a source (AI, GPT, LLM, human-written,
…). Matching is case-insensitive and on word boundaries, so "said" does not match "AI"
and "email" does not match "ai".

A mention is a warning for the owner, not an error: "AI" in a topic such as "AI safety"
may name the field, not the source.

Pure: no Django.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["SOURCE_TERMS", "SourceMention", "source_mentions"]

#: Words that name an idea's source whatever the study's conditions are called.
SOURCE_TERMS: tuple[str, ...] = (
    r"AI",
    r"A\.I\.",
    r"artificial[ -]intelligence",
    r"(?:Chat)?GPT(?:-?\d+(?:\.\d+)?[a-z]?)?",
    r"LLMs?",
    r"(?:large[ -])?language[ -]models?",
    r"Claude",
    r"Gemini",
    r"Llama",
    r"(?:human|expert|person|people)[ -](?:written|generated|authored|created|made)",
    r"(?:AI|machine|model|LLM|computer)[ -](?:written|generated|authored|created|made)",
    r"written[ -]by[ -](?:humans?|people|experts?|an?[ -]AI|machines?|models?)",
    r"humans?[ -](?:vs\.?|versus|or|and)[ -](?:AI|machines?|models?|LLMs?)",
)
_EDGE_BEFORE = r"(?<![A-Za-z0-9_])"
_EDGE_AFTER = r"(?![A-Za-z0-9_])"


@dataclass(frozen=True)
class SourceMention:
    """One match: the field it is in, the text matched, why it matters and its context."""

    field: str
    term: str
    reason: str
    excerpt: str


def _condition_pattern(name: str) -> str:
    # "AI_Rerank" also matches "AI Rerank" and "AI-Rerank".
    parts = [re.escape(p) for p in re.split(r"[\s_-]+", name.strip()) if p]
    return r"[\s_-]+".join(parts)


def _patterns(conditions: Sequence[str]) -> list[tuple[re.Pattern[str], str]]:
    out: list[tuple[re.Pattern[str], str]] = []
    seen: set[str] = set()
    # Longer names first, so "AI_Rerank" is reported as itself rather than as "AI".
    for name in sorted({c for c in conditions if c.strip()}, key=len, reverse=True):
        if name.lower() in seen:
            continue
        seen.add(name.lower())
        pattern = re.compile(_EDGE_BEFORE + _condition_pattern(name) + _EDGE_AFTER, re.IGNORECASE)
        out.append((pattern, f"names the condition “{name}”"))
    for term in SOURCE_TERMS:
        pattern = re.compile(_EDGE_BEFORE + term + _EDGE_AFTER, re.IGNORECASE)
        out.append((pattern, "names a source of ideas"))
    return out


def _excerpt(text: str, start: int, end: int, width: int = 30) -> str:
    lo, hi = max(0, start - width), min(len(text), end + width)
    return ("…" if lo else "") + " ".join(text[lo:hi].split()) + ("…" if hi < len(text) else "")


def source_mentions(
    texts: Mapping[str, str], *, conditions: Sequence[str] = ()
) -> list[SourceMention]:
    """Every place in `texts` (field name → text) that names one of `conditions` (keys
    or labels) or a source word; one mention per matched span, in the text's order."""
    patterns = _patterns(conditions)
    mentions: list[SourceMention] = []
    for field, text in texts.items():
        candidates = [
            (m.start(), m.end(), rank, m.group(0), reason)
            for rank, (pattern, reason) in enumerate(patterns)
            for m in pattern.finditer(text or "")
        ]
        # The longest match wins a span ("written by an AI" over "AI"); at equal length
        # the earlier pattern, so a condition's name over a source word.
        candidates.sort(key=lambda c: (-(c[1] - c[0]), c[2]))
        taken: list[tuple[int, int, str, str]] = []
        for start, end, _, term, reason in candidates:
            if not any(start < hi and lo < end for lo, hi, _, _ in taken):
                taken.append((start, end, term, reason))
        mentions += [
            SourceMention(field, term, reason, _excerpt(text, start, end))
            for start, end, term, reason in sorted(taken)
        ]
    return mentions
