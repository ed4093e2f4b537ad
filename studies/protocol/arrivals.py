"""Participants who arrive one at a time from a participant platform: the URL parameters
they bring, and the ideas one of them is given on arrival. Pure: no Django.

The study-wide solver (`assignment.py`) places every reviewer at once and insists on each
idea's minimum number of reviews, which cannot hold while participants trickle in. An
arriving participant is therefore given work alone, under the same per-reviewer rules as
far as the ideas on offer allow: only ideas of their chosen topics (any topic if they chose
none), none written at their institution, none that already has the study's maximum of
reviews, at least one human and one AI idea when both are on offer, conditions as even as
the load allows, and the least-reviewed ideas first, ties broken by a seeded draw.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .institutions import institution_keys

# Platform ids are opaque tokens; this admits Prolific's 24 hex digits and the usual
# shapes elsewhere, and keeps anything that could be markup or a path out of the rows.
ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,199}$")
PARAM_PATTERN = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


@dataclass(frozen=True)
class ArrivalIds:
    participant: str
    study: str = ""
    session: str = ""


class ArrivalRefused(ValueError):
    """An arrival that cannot be taken; the message is for the participant."""


def arrival_ids(
    query: Mapping[str, str], *, participant_param: str, study_param: str, session_param: str
) -> ArrivalIds:
    """The participant's, study's and session's ids from a link's query parameters, by
    the names the owner set; a missing participant id or a malformed one is refused."""

    def value(name: str, what: str, required: bool) -> str:
        raw = (query.get(name) or "").strip() if name else ""
        if not raw:
            if required:
                raise ArrivalRefused(
                    f"The link has no {what} (URL parameter {name}). Open the study from "
                    "the platform's page so that the link carries your id."
                )
            return ""
        if not ID_PATTERN.match(raw):
            raise ArrivalRefused(
                f"The {what} in the link (URL parameter {name}) is not a valid id: use "
                "letters, digits and - _ . : @ only, at most 200 characters."
            )
        return raw

    return ArrivalIds(
        participant=value(participant_param, "participant id", True),
        study=value(study_param, "study id", False),
        session=value(session_param, "session id", False),
    )


@dataclass(frozen=True)
class OfferedIdea:
    """An idea as an arrival sees it: its current live reviews count towards the cap."""

    id: str
    topic: str
    conditions: tuple[str, ...]
    institutions: tuple[str, ...] = ()
    reviews: int = 0


def arrival_pick(
    ideas: Sequence[OfferedIdea],
    *,
    condition_kinds: Mapping[str, str],
    topics: Sequence[str],
    load: int,
    institution: str,
    max_reviews: int,
    seed: int,
) -> list[str]:
    """The ids of up to `load` ideas for one arriving participant (fewer when fewer are
    on offer)."""
    mine = institution_keys([institution])
    wanted = set(topics)
    offer = [
        i
        for i in ideas
        if (not wanted or i.topic in wanted)
        and i.reviews < max_reviews
        and not (mine & institution_keys(i.institutions))
    ]
    rng = random.Random(seed)
    draw = {i.id: rng.random() for i in offer}
    rank = {t: k for k, t in enumerate(topics)}
    picked: list[OfferedIdea] = []
    seen: Counter[str] = Counter()

    def kinds(idea: OfferedIdea) -> set[str]:
        return {condition_kinds.get(c, "") for c in idea.conditions}

    def take(pool: list[OfferedIdea]) -> None:
        best = min(
            pool,
            key=lambda i: (
                min(seen[c] for c in i.conditions),
                i.reviews,
                rank.get(i.topic, 0),
                draw[i.id],
            ),
        )
        picked.append(best)
        offer.remove(best)
        seen.update(best.conditions)

    for kind in ("human", "ai"):
        pool = [i for i in offer if kind in kinds(i)]
        if pool and len(picked) < load and not any(kind in kinds(p) for p in picked):
            take(pool)
    while offer and len(picked) < load:
        take(offer)
    return [i.id for i in picked]
