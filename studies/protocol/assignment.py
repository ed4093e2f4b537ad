"""Balanced reviewer-to-idea assignment for blind review studies.

The rules follow Si et al.'s review protocol: a reviewer only gets ideas from the topics
they chose and exactly their load; every idea gets between 2 and 4 reviews; every reviewer
sees at least two conditions, at least one human and one AI idea, with the conditions as
balanced as the load allows; nobody reviews an idea written at their own institution;
reviews already submitted stay; among assignments that satisfy all of that, first-choice
topics and even review counts are preferred, and ties are broken at random.

How it is solved, and why in two stages. Ideas of one topic whose condition set is the
same ("group", e.g. Math × {AI}) are interchangeable for every reviewer-side rule, so the
integer program decides only *how many* ideas of each group each reviewer gets
(`a[r, g]`), which is at most ~8 variables per reviewer instead of one per (reviewer,
idea) pair: 80k integer variables at 100× the Si et al. scale rather than 33 million.
Conflicts of interest, the only idea-specific rule, enter the program as capacity
constraints per (group, institution). A second stage then picks the concrete ideas of
each group with a maximum flow that has lower and upper bounds per idea (review counts
as even as possible, widened only if conflicts make that impossible), with reviewers and
ideas shuffled by the seed so that equally good assignments are drawn at random. At
conference scale a group's allowed (reviewer, idea) cells run into millions, so large
groups try the flow over a band of them first (`_band_cells`); which cells a flow may
use changes only which equally good ideas are drawn, never how many of each group a
reviewer gets, nor the objective.

Solver: scipy's HiGHS (`scipy.optimize.milp`). The aggregate program is small enough that
HiGHS solves it in well under a second at the Si et al. scale, and scipy is already a
dependency; OR-Tools CP-SAT would add a 30 MB wheel for no measured gain.

When the rules cannot all hold, `solve_assignment` returns a result with status
"infeasible" and `problems` in plain words: first cheap pre-checks (topic capacity,
per-reviewer eligibility, conditions on offer), then, if those pass, the same program with
a slack on every rule, whose non-zero slacks say which rule breaks and by how much.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import math
import secrets
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, linprog, milp
from scipy.sparse.csgraph import maximum_flow

from ..analysis.rounding import counted
from .institutions import institution_keys

HUMAN = "human"
AI = "ai"
KINDS = (HUMAN, AI)
TOPIC_CHOICES = ("first", "equal")


# --------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class IdeaInput:
    """An idea as the solver sees it (the stored row is the `Idea` model)."""

    id: str
    topic: str
    conditions: tuple[str, ...]
    # Author institutions (free text; normalised with `institutions.normalize_institution`).
    institutions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if isinstance(self.conditions, str):
            object.__setattr__(self, "conditions", (self.conditions,))
        if isinstance(self.institutions, str):
            object.__setattr__(self, "institutions", (self.institutions,))
        if not self.conditions:
            raise ValueError(f"idea {self.id} belongs to no condition")


@dataclass(frozen=True)
class ReviewerInput:
    """A reviewer's topics, load range and institution as the solver sees them (the
    stored row is the `Reviewer` model)."""

    id: str
    # Ranked: first choice first.
    topics: tuple[str, ...]
    load_min: int
    # None means an exact load of `load_min`.
    load_max: int | None = None
    institution: str = ""
    email: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.topics, str):
            object.__setattr__(self, "topics", (self.topics,))
        if self.load_max is None:
            object.__setattr__(self, "load_max", self.load_min)
        if self.load_min < 0 or self.load_max < self.load_min:  # type: ignore[operator]
            raise ValueError(
                f"reviewer {self.id}: load range {self.load_min}–{self.load_max} is invalid"
            )

    @property
    def max_load(self) -> int:
        return int(self.load_max if self.load_max is not None else self.load_min)


@dataclass(frozen=True)
class Parameters:
    min_reviews: int = 2
    max_reviews: int = 4
    min_conditions: int = 2
    require_human_and_ai: bool = True
    # Per reviewer, max count − min count over the conditions their topics offer.
    max_condition_spread: int = 1
    # "best": if no assignment keeps every reviewer within `max_condition_spread`, accept
    # the smallest possible excess (reported per reviewer). "strict": report infeasible.
    balance: str = "best"
    # Cost per review of a topic ranked k-th by the reviewer (first choice costs 0).
    topic_rank_weight: int = 1
    # How a reviewer's ranked topics are used: "first" prefers the first choice (the
    # weight above); "equal" treats them alike, so which topic each review comes from is
    # left to the seeded random tie-break, as in Si et al. (about half from each when the
    # topics' capacity allows).
    topic_choice: str = "first"
    # The k-th review of an idea beyond `min_reviews` costs k × this: review counts even out.
    evenness_weight: int = 1
    seed: int | None = None
    time_limit: float = 300.0

    def __post_init__(self) -> None:
        if not 0 <= self.min_reviews <= self.max_reviews:
            raise ValueError("need 0 ≤ min_reviews ≤ max_reviews")
        if self.balance not in ("best", "strict"):
            raise ValueError("balance must be 'best' or 'strict'")
        if self.topic_choice not in TOPIC_CHOICES:
            raise ValueError(f"topic_choice must be one of {', '.join(TOPIC_CHOICES)}")

    @property
    def rank_weight(self) -> int:
        """The cost per rank step actually used: none when both choices count alike."""
        return self.topic_rank_weight if self.topic_choice == "first" else 0


@dataclass(frozen=True)
class AssignmentInputs:
    ideas: Sequence[IdeaInput]
    # Condition key -> kind ("human" or "ai").
    conditions: Mapping[str, str]
    reviewers: Sequence[ReviewerInput]
    # (reviewer id, idea id) pairs already submitted: they stay.
    fixed: Sequence[tuple[str, str]] = ()
    params: Parameters = field(default_factory=Parameters)
    # Every topic of the study, also those with no idea up for assignment (none with an
    # approved text yet): a reviewer who chose one of them chose a topic of the study.
    study_topics: frozenset[str] = frozenset()


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class Problem:
    """One rule that cannot hold, in words a study owner can act on."""

    rule: str  # input, fixed, reviewer_load, topic_capacity, idea_reviews, conflict,
    # human_idea, ai_idea, conditions, balance, placement
    subject: str  # reviewer id, idea id, topic name, the idea kind missing, or "" for the study
    message: str
    shortfall: int | None = None

    def __str__(self) -> str:
        return self.message


@dataclass
class AssignmentResult:
    status: str  # "optimal", "time_limit" (best found, gap in objective), "infeasible"
    pairs: tuple[tuple[str, str], ...]
    reviewer_loads: dict[str, int]
    reviewer_condition_counts: dict[str, dict[str, int]]
    idea_review_counts: dict[str, int]
    seed: int
    solve_seconds: float
    objective: dict[str, Any]
    problems: tuple[Problem, ...] = ()
    notes: tuple[str, ...] = ()
    # Reviewer id -> condition spread accepted beyond `max_condition_spread` because no
    # assignment does better (only with balance="best").
    balance_excess: dict[str, int] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def feasible(self) -> bool:
        return self.status != "infeasible"

    def explanation(self) -> str:
        return "\n".join(p.message for p in self.problems)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["pairs"] = [list(p) for p in self.pairs]
        data["problems"] = [asdict(p) for p in self.problems]
        data["notes"] = list(self.notes)
        data["feasible"] = self.feasible
        return data


# --------------------------------------------------------------------------- preparation


# A reviewer's groups: {group: (topic rank, or None if only submitted reviews; capacity)}.
_Eligible = dict[int, tuple[int | None, int]]


@dataclass
class _Group:
    topic: str
    signature: tuple[str, ...]
    ideas: list[int]


@dataclass
class _Prepared:
    inputs: AssignmentInputs
    params: Parameters
    cond_keys: list[str]
    idea_keys: list[frozenset[str]]
    reviewer_keys: list[frozenset[str]]
    active: list[int]  # reviewer indices with load_max > 0 or fixed reviews
    groups: list[_Group]
    group_of_idea: list[int]
    fixed_pairs: list[tuple[int, int]]
    fixed_by_reviewer: dict[int, list[int]]
    fixed_per_idea: np.ndarray
    # Per active reviewer: {group: (rank or None if only fixed, capacity)}
    eligible: dict[int, dict[int, tuple[int | None, int]]]
    cond_avail: dict[int, list[str]]  # conditions the reviewer's eligible ideas offer
    problems: list[Problem]


def _n(count: int, noun: str, plural: str = "") -> str:
    """A count with its noun in the right number: "1 idea", "2 ideas"."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def _their_topics(topics: Sequence[str], *, last: bool = False) -> str:
    """A reviewer's topics after "their": "only topic, Bias," or "topics Bias and Law"
    (without the closing comma at the end of a sentence)."""
    if len(topics) == 1:
        return f"only topic, {topics[0]}" + ("" if last else ",")
    return f"topics {_topic_list(topics)}"


def _no_topic_message(rev: ReviewerInput, prep: _Prepared) -> str:
    """Why a reviewer has no topic with ideas up for assignment: their topics are not the
    study's, or they are but hold no idea that can be assigned (none approved yet)."""
    chosen = list(dict.fromkeys(rev.topics))
    if not chosen:
        return f"reviewer {rev.id} chose no topic of this study"
    in_study = [t for t in chosen if t in prep.inputs.study_topics]
    if not in_study:
        return f"reviewer {rev.id} chose no topic of this study (chose {_topic_list(chosen)})"
    one = len(in_study) == 1
    others = [t for t in chosen if t not in in_study]
    if others:
        topics = f"{'topic' if one else 'topics'} {_topic_list(in_study)}"
        what = "is not a topic" if len(others) == 1 else "are not topics"
        rest = f"; their other choice, {_topic_list(others)}, {what} of this study"
    else:
        topics, rest = _their_topics(in_study), ""
    return (
        f"reviewer {rev.id}'s {topics} {'has' if one else 'have'} "
        f"no idea that can be assigned yet{rest}"
    )


def _topic_list(topics: Iterable[str]) -> str:
    items = list(topics)
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _prepare(inputs: AssignmentInputs) -> _Prepared:
    params = inputs.params
    ideas, reviewers = list(inputs.ideas), list(inputs.reviewers)
    problems: list[Problem] = []
    cond_keys = list(inputs.conditions)
    for key, kind in inputs.conditions.items():
        if kind not in KINDS:
            problems.append(
                Problem("input", key, f"condition {key} has kind {kind!r}; use 'human' or 'ai'")
            )
    idea_index: dict[str, int] = {}
    for i, idea in enumerate(ideas):
        if idea.id in idea_index:
            problems.append(Problem("input", idea.id, f"idea id {idea.id} appears twice"))
        idea_index[idea.id] = i
        unknown = [c for c in idea.conditions if c not in inputs.conditions]
        if unknown:
            problems.append(
                Problem(
                    "input",
                    idea.id,
                    f"idea {idea.id} names unknown condition{'s' if len(unknown) > 1 else ''} "
                    f"{_topic_list(unknown)}",
                )
            )
    reviewer_index: dict[str, int] = {}
    for r, rev in enumerate(reviewers):
        if rev.id in reviewer_index:
            problems.append(Problem("input", rev.id, f"reviewer id {rev.id} appears twice"))
        reviewer_index[rev.id] = r

    # Many ideas and reviewers share a spelling: each distinct one is normalised once.
    idea_memo: dict[tuple[str, ...], frozenset[str]] = {}
    idea_keys = []
    for idea in ideas:
        authors = tuple(idea.institutions)
        if authors not in idea_memo:
            idea_memo[authors] = institution_keys(authors)
        idea_keys.append(idea_memo[authors])
    rev_memo: dict[tuple[str, str], frozenset[str]] = {}
    reviewer_keys = []
    for rev in reviewers:
        spelled = (rev.institution, rev.email)
        if spelled not in rev_memo:
            rev_memo[spelled] = institution_keys([rev.institution], [rev.email])
        reviewer_keys.append(rev_memo[spelled])

    groups: list[_Group] = []
    group_lookup: dict[tuple[str, tuple[str, ...]], int] = {}
    group_of_idea = []
    for i, idea in enumerate(ideas):
        gkey = (idea.topic, tuple(sorted(set(idea.conditions))))
        if gkey not in group_lookup:
            group_lookup[gkey] = len(groups)
            groups.append(_Group(gkey[0], gkey[1], []))
        groups[group_lookup[gkey]].ideas.append(i)
        group_of_idea.append(group_lookup[gkey])
    topic_groups: dict[str, list[int]] = defaultdict(list)
    for g, grp in enumerate(groups):
        topic_groups[grp.topic].append(g)

    fixed_pairs: list[tuple[int, int]] = []
    fixed_by_reviewer: dict[int, list[int]] = defaultdict(list)
    seen_fixed = set()
    for rid, iid in inputs.fixed:
        if rid not in reviewer_index or iid not in idea_index:
            problems.append(
                Problem(
                    "fixed",
                    rid,
                    f"submitted review ({rid}, {iid}) names an unknown "
                    + ("reviewer" if rid not in reviewer_index else "idea"),
                )
            )
            continue
        pair = (reviewer_index[rid], idea_index[iid])
        if pair in seen_fixed:
            continue
        seen_fixed.add(pair)
        fixed_pairs.append(pair)
        fixed_by_reviewer[pair[0]].append(pair[1])
    fixed_per_idea = np.zeros(len(ideas), dtype=np.int64)
    for _, i in fixed_pairs:
        fixed_per_idea[i] += 1

    active = [r for r, rev in enumerate(reviewers) if rev.max_load > 0 or r in fixed_by_reviewer]
    # Per group: institution key -> its ideas, so a reviewer's conflicts are set lookups.
    group_inst: list[dict[str, set[int]]] = []
    for grp in groups:
        by_key: dict[str, set[int]] = defaultdict(set)
        for i in grp.ideas:
            for k in idea_keys[i]:
                by_key[k].add(i)
        group_inst.append(by_key)
    group_size = [len(grp.ideas) for grp in groups]
    eligible: dict[int, _Eligible] = {}
    cond_avail: dict[int, list[str]] = {}
    # A reviewer with nothing submitted depends only on their topics and institutions:
    # each such combination is worked out once.
    plain: dict[tuple[tuple[str, ...], frozenset[str]], tuple[_Eligible, list[str]]] = {}
    for r in active:
        rev, keys = reviewers[r], reviewer_keys[r]
        combo = (tuple(rev.topics), keys)
        if combo in plain and r not in fixed_by_reviewer:
            known_entry, known_avail = plain[combo]
            eligible[r], cond_avail[r] = dict(known_entry), list(known_avail)
            continue
        fixed_set = set(fixed_by_reviewer.get(r, ()))
        entry: _Eligible = {}
        for rank, topic in enumerate(dict.fromkeys(rev.topics)):
            for g in topic_groups.get(topic, ()):
                by_key = group_inst[g]  # empty for a group without author institutions
                blocked_sets = [by_key[k] for k in keys if k in by_key] if by_key else None
                if not blocked_sets:
                    cap = group_size[g]
                else:
                    blocked = set().union(*blocked_sets) - fixed_set
                    cap = group_size[g] - len(blocked)
                if cap:
                    entry[g] = (rank, cap)
        for i in fixed_set:
            g = group_of_idea[i]
            if g not in entry:
                cap = sum(1 for j in groups[g].ideas if j in fixed_set)
                entry[g] = (None, cap)
        eligible[r] = entry
        avail = {c for g in entry for c in groups[g].signature}
        cond_avail[r] = [c for c in cond_keys if c in avail]
        if not fixed_set:
            plain[combo] = (dict(entry), list(cond_avail[r]))

    return _Prepared(
        inputs=inputs,
        params=params,
        cond_keys=cond_keys,
        idea_keys=idea_keys,
        reviewer_keys=reviewer_keys,
        active=active,
        groups=groups,
        group_of_idea=group_of_idea,
        fixed_pairs=fixed_pairs,
        fixed_by_reviewer=dict(fixed_by_reviewer),
        fixed_per_idea=fixed_per_idea,
        eligible=eligible,
        cond_avail=cond_avail,
        problems=problems,
    )


def _kind_of(prep: _Prepared, condition: str) -> str:
    return prep.inputs.conditions.get(condition, "")


def _group_has_kind(prep: _Prepared, g: int, kind: str) -> bool:
    return any(_kind_of(prep, c) == kind for c in prep.groups[g].signature)


# --------------------------------------------------------------------------- pre-checks


def _prechecks(prep: _Prepared) -> list[Problem]:
    params = prep.params
    ideas, reviewers = prep.inputs.ideas, prep.inputs.reviewers
    problems: list[Problem] = []
    # Every idea sits in one group, whose signature is the set of its conditions.
    kinds_present = {_kind_of(prep, c) for grp in prep.groups for c in grp.signature}
    if params.require_human_and_ai:
        for kind in KINDS:
            if kind not in kinds_present:
                problems.append(
                    Problem(
                        "input",
                        kind,
                        f"the study has no {kind.replace('ai', 'AI')} idea, but every reviewer "
                        "must see at least one human and one AI idea",
                    )
                )
    study_topics = {grp.topic for grp in prep.groups}
    topic_size: Counter[str] = Counter()
    topic_kinds: dict[str, set[str]] = defaultdict(set)
    for grp in prep.groups:
        topic_size[grp.topic] += len(grp.ideas)
        topic_kinds[grp.topic].update(_kind_of(prep, c) for c in grp.signature)

    group_kinds = [{_kind_of(prep, c) for c in grp.signature} for grp in prep.groups]
    for i in np.flatnonzero(prep.fixed_per_idea > params.max_reviews).tolist():
        count = prep.fixed_per_idea[i]
        if count > params.max_reviews:
            problems.append(
                Problem(
                    "fixed",
                    ideas[i].id,
                    f"idea {ideas[i].id} already has {_n(int(count), 'submitted review')}, more than the "
                    f"maximum of {params.max_reviews}",
                    int(count - params.max_reviews),
                )
            )

    # A reviewer with nothing submitted passes or fails these checks on their topics,
    # institutions and load range alone: a combination that passed once passes again.
    passed: set[tuple[tuple[str, ...], frozenset[str], int, int]] = set()
    for r in prep.active:
        rev = reviewers[r]
        shape = None
        if r not in prep.fixed_by_reviewer:
            shape = (tuple(rev.topics), prep.reviewer_keys[r], rev.load_min, rev.max_load)
            if shape in passed:
                continue
        found = len(problems)
        fixed_n = len(prep.fixed_by_reviewer.get(r, ()))
        if fixed_n > rev.max_load:
            problems.append(
                Problem(
                    "fixed",
                    rev.id,
                    f"reviewer {rev.id} already submitted {_n(fixed_n, 'review')}, more than their "
                    f"maximum load of {rev.max_load}",
                    fixed_n - rev.max_load,
                )
            )
        known = [t for t in dict.fromkeys(rev.topics) if t in study_topics]
        if not known:
            problems.append(
                Problem("reviewer_load", rev.id, _no_topic_message(rev, prep), rev.load_min)
            )
            continue
        entry = prep.eligible[r]
        capacity = sum(c for _, c in entry.values())
        has_topic_ideas = any(topic_size[t] for t in known)
        one = len(known) == 1
        if capacity == 0 and has_topic_ideas:
            inst = _topic_list(sorted(prep.reviewer_keys[r])) or "unknown"
            problems.append(
                Problem(
                    "conflict",
                    rev.id,
                    f"reviewer {rev.id}'s {_their_topics(known)} "
                    f"{'holds' if one else 'hold'} only ideas from their own "
                    f"institution ({inst})",
                    rev.load_min,
                )
            )
            continue
        if capacity < rev.load_min:
            problems.append(
                Problem(
                    "reviewer_load",
                    rev.id,
                    f"reviewer {rev.id} wants at least {_n(rev.load_min, 'idea')}, but their "
                    f"{_their_topics(known)} "
                    f"{'holds' if one else 'hold'} only {capacity} they may review "
                    f"(ideas from their own institution excluded)",
                    rev.load_min - capacity,
                )
            )
        if params.require_human_and_ai:
            offered = set().union(*(group_kinds[g] for g in entry))
            for kind, label in ((HUMAN, "human"), (AI, "AI")):
                if kind in offered:
                    continue
                in_topics = any(kind in topic_kinds[t] for t in known)
                where = " outside their own institution" if in_topics else ""
                problems.append(
                    Problem(
                        f"{kind}_idea",
                        rev.id,
                        f"no {label} idea in reviewer {rev.id}'s "
                        f"{_their_topics(known, last=not where)}{where}",
                        1,
                    )
                )
            if rev.max_load < 2:
                problems.append(
                    Problem(
                        "reviewer_load",
                        rev.id,
                        f"reviewer {rev.id}'s maximum load of {rev.max_load} cannot hold both "
                        "a human and an AI idea",
                        2 - rev.max_load,
                    )
                )
        need = params.min_conditions
        avail = prep.cond_avail[r]
        if len(avail) < need:
            problems.append(
                Problem(
                    "conditions",
                    rev.id,
                    f"reviewer {rev.id}'s {_their_topics(known)} "
                    f"{'offers' if one else 'offer'} {_conditions_offered(avail)}; each "
                    f"reviewer must see {need}",
                    need - len(avail),
                )
            )
        elif rev.max_load < need:
            problems.append(
                Problem(
                    "conditions",
                    rev.id,
                    f"reviewer {rev.id}'s maximum load of {rev.max_load} is below the "
                    f"{_n(need, 'condition')} each reviewer must see",
                    need - rev.max_load,
                )
            )
        if shape is not None and len(problems) == found:
            passed.add(shape)

    problems.extend(_topic_capacity_checks(prep))
    problems.extend(_idea_eligibility_checks(prep))
    return problems


def _topic_capacity_checks(prep: _Prepared) -> list[Problem]:
    """Hall-type counting over sets of topics: supply of review slots versus demand."""
    params = prep.params
    ideas, reviewers = prep.inputs.ideas, prep.inputs.reviewers
    topics = sorted({grp.topic for grp in prep.groups})
    n_topic: Counter[str] = Counter()
    need_topic: Counter[str] = Counter()
    for grp in prep.groups:
        n_topic[grp.topic] += len(grp.ideas)
        need_topic[grp.topic] += int(
            np.maximum(prep.fixed_per_idea[grp.ideas], params.min_reviews).sum()
        )
    bit = {t: 1 << k for k, t in enumerate(topics)}
    # Reviews already submitted outside a reviewer's current topics still count.
    masks = []
    for r in prep.active:
        chosen = sum(bit[t] for t in set(reviewers[r].topics) if t in bit)
        fixed_mask = sum(
            bit[t] for t in {ideas[i].topic for i in prep.fixed_by_reviewer.get(r, ())}
        )
        masks.append((chosen, chosen | fixed_mask, reviewers[r].max_load, reviewers[r].load_min))
    # The same sums over reviewers as arrays: one pass per subset instead of a Python loop.
    m_chosen, m_both, m_hi, m_lo = (
        np.array([m[j] for m in masks], dtype=np.int64).reshape(-1) for j in range(4)
    )
    max_size = len(topics) if len(topics) <= 10 else 2
    subsets: list[tuple[str, ...]] = []
    for size in range(1, max_size + 1):
        subsets.extend(itertools.combinations(topics, size))
    if max_size < len(topics):
        subsets.append(tuple(topics))
    problems: list[Problem] = []
    flagged_low: list[set[str]] = []
    flagged_high: list[set[str]] = []
    for subset in subsets:
        s = set(subset)
        smask = sum(bit[t] for t in s)
        n_ideas = sum(n_topic[t] for t in s)
        need = sum(need_topic[t] for t in s)
        offer = int(m_hi[(m_both & smask) != 0].sum())
        name = _topic_list(subset) if len(subset) < len(topics) else "all topics"
        if offer < need and not any(f <= s for f in flagged_low):
            flagged_low.append(s)
            if len(s) == len(topics):
                what, who = "the study's ideas need", "the approved reviewers"
            elif len(s) == 1:
                what, who = f"topic {name} needs", f"the approved reviewers who chose {name}"
            else:
                what = f"topics {name} together need"
                who = "the approved reviewers who chose any of them"
            problems.append(
                Problem(
                    "topic_capacity",
                    name,
                    f"{what} ≥ {need} review slots "
                    f"({_n(n_ideas, 'idea')} × {_n(params.min_reviews, 'review')}), but "
                    + (
                        f"no approved reviewer chose {name}"
                        if offer == 0 and len(s) == 1
                        else f"{who} offer at most {offer} (the sum of their largest loads)"
                    ),
                    need - offer,
                )
            )
        forced = int(m_lo[(m_chosen != 0) & ((m_both & ~smask) == 0)].sum())
        room = params.max_reviews * n_ideas
        if forced > room and not any(f <= s for f in flagged_high):
            flagged_high.append(s)
            who = f"only {name}" if len(s) < len(topics) else "any topic"
            problems.append(
                Problem(
                    "topic_capacity",
                    name,
                    f"reviewers who chose {who} need ≥ {_n(forced, 'review')} (their minimum "
                    f"loads), but the {_n(n_ideas, 'idea')} there take at most {room} "
                    f"({n_ideas} × {params.max_reviews})",
                    forced - room,
                )
            )
    return problems


def _idea_eligibility_checks(prep: _Prepared) -> list[Problem]:
    params = prep.params
    ideas, reviewers = prep.inputs.ideas, prep.inputs.reviewers
    by_topic: dict[str, list[int]] = defaultdict(list)
    for r in prep.active:
        for t in dict.fromkeys(reviewers[r].topics):
            by_topic[t].append(r)
    fixed_reviewers: dict[int, set[int]] = defaultdict(set)
    for r, i in prep.fixed_pairs:
        fixed_reviewers[i].add(r)
    key_count: dict[str, Counter[str]] = {t: Counter() for t in by_topic}
    for t, members in by_topic.items():
        count = key_count[t]
        for r in members:
            for k in prep.reviewer_keys[r]:
                count[k] += 1
    problems = []
    no_keys: Counter[str] = Counter()
    for i, idea in enumerate(ideas):
        candidates = by_topic.get(idea.topic, [])
        keys = prep.idea_keys[i]
        if not keys:
            blocked = 0
        elif len(keys) == 1:
            blocked = sum(key_count.get(idea.topic, no_keys)[k] for k in keys)
        else:
            blocked = sum(1 for r in candidates if prep.reviewer_keys[r] & keys)
        # Submitted reviews count even when the reviewer would no longer be eligible.
        extra_fixed = sum(
            1
            for r in fixed_reviewers.get(i, ())
            if idea.topic not in _topics_of(prep, r) or prep.reviewer_keys[r] & keys
        )
        available = len(candidates) - blocked + extra_fixed
        if available < params.min_reviews:
            problems.append(
                Problem(
                    "idea_reviews",
                    idea.id,
                    _idea_reviewers_message(idea, len(candidates), blocked, available, params),
                    params.min_reviews - available,
                )
            )
    return problems


def _conditions_offered(avail: Sequence[str]) -> str:
    """What a reviewer's eligible ideas offer: "ideas of one condition only (ai)"."""
    if not avail:
        return "no idea they may review"
    if len(avail) == 1:
        return f"ideas of one condition only ({avail[0]})"
    return f"ideas of only {len(avail)} conditions ({_topic_list(avail)})"


def _idea_reviewers_message(
    idea: IdeaInput, chose: int, blocked: int, available: int, params: Parameters
) -> str:
    """Why an idea has too few possible reviewers: nobody chose its topic, or those who
    did are from its authors' institution, or there are just too few of them."""
    needs = f"it needs {_n(params.min_reviews, 'review')}"
    if chose == 0 and available == 0:
        return (
            f"idea {idea.id} can be reviewed by nobody: no approved reviewer chose its "
            f"topic, {idea.topic}; {needs}"
        )
    who = "nobody" if available == 0 else f"only {_n(available, 'reviewer')}"
    extra = ""
    if blocked:
        extra = (
            f" ({_n(blocked, 'reviewer')} who chose {idea.topic} "
            f"{'is' if blocked == 1 else 'are'} from its authors' institution)"
        )
    return f"idea {idea.id} (topic {idea.topic}) can be reviewed by {who}{extra}; {needs}"


def _topics_of(prep: _Prepared, r: int) -> tuple[str, ...]:
    return prep.inputs.reviewers[r].topics


# --------------------------------------------------------------------------- the program


class _Program:
    """Sparse MILP builder: columns with bounds, costs and integrality; ranged rows."""

    def __init__(self) -> None:
        self.cost: list[float] = []
        self.lb: list[float] = []
        self.ub: list[float] = []
        self.integer: list[int] = []
        self.row_lo: list[float] = []
        self.row_hi: list[float] = []
        # Entries as (rows, columns, values) array chunks in the order they were added;
        # small rows gather in the lists below until the next chunk or `matrix` call.
        self._chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self._nnz = 0
        self.ri: list[int] = []
        self.ci: list[int] = []
        self.val: list[float] = []
        self.slacks: list[tuple[int, str, Any, int]] = []  # (column, family, subject, sign)
        self._matrix: tuple[tuple[int, int, int], sparse.csr_array] | None = None

    def var(self, cost: float = 0.0, lb: float = 0.0, ub: float = math.inf, integer=False) -> int:
        self.cost.append(cost)
        self.lb.append(lb)
        self.ub.append(ub)
        self.integer.append(1 if integer else 0)
        return len(self.cost) - 1

    def add_vars(
        self, costs: Sequence[float], lb: float = 0.0, ub: float = math.inf, integer=False
    ) -> list[int]:
        """Several columns with the same bounds: what `var` does for each cost in turn."""
        first = len(self.cost)
        self.cost.extend(costs)
        self.lb.extend([lb] * len(costs))
        self.ub.extend([ub] * len(costs))
        self.integer.extend([1 if integer else 0] * len(costs))
        return list(range(first, len(self.cost)))

    def row(self, cols: Sequence[int], coefs: Sequence[float], lo: float, hi: float) -> int:
        r = len(self.row_lo)
        self.row_lo.append(lo)
        self.row_hi.append(hi)
        self.ri.extend([r] * len(cols))
        self.ci.extend(cols)
        self.val.extend(coefs)
        self._nnz += len(cols)
        return r

    def row_array(self, cols: np.ndarray, coefs: np.ndarray, lo: float, hi: float) -> int:
        """`row` for columns and coefficients already in arrays (long rows)."""
        self._flush()
        r = len(self.row_lo)
        self.row_lo.append(lo)
        self.row_hi.append(hi)
        cols = np.asarray(cols, np.int64)
        self._chunks.append((np.full(len(cols), r, np.int64), cols, np.asarray(coefs, float)))
        self._nnz += len(cols)
        return r

    def _flush(self) -> None:
        if self.ri:
            self._chunks.append(
                (
                    np.asarray(self.ri, np.int64),
                    np.asarray(self.ci, np.int64),
                    np.asarray(self.val, float),
                )
            )
            self.ri, self.ci, self.val = [], [], []

    def matrix(self) -> sparse.csr_array:
        """The constraint matrix; built once per shape (the LP and the integer programs
        that follow it share one). Callers must not modify it."""
        n, m = len(self.cost), len(self.row_lo)
        key = (n, m, self._nnz)
        if self._matrix is None or self._matrix[0] != key:
            self._flush()
            if len(self._chunks) > 1:
                rows, cols, vals = zip(*self._chunks, strict=True)
                self._chunks = [(np.concatenate(rows), np.concatenate(cols), np.concatenate(vals))]
            empty = np.zeros(0, np.int64)
            ri, ci, val = self._chunks[0] if self._chunks else (empty, empty, empty)
            built = sparse.csr_array((np.asarray(val, float), (ri, ci)), shape=(m, n))
            self._matrix = (key, built)
        return self._matrix[1]

    def solve(
        self,
        time_limit: float,
        rel_gap: float,
        *,
        relax: bool = False,
        lb: np.ndarray | None = None,
        ub: np.ndarray | None = None,
        presolve: bool = True,
    ) -> Any:
        n, m = len(self.cost), len(self.row_lo)
        matrix = self.matrix()
        constraints = (
            [LinearConstraint(matrix, np.asarray(self.row_lo), np.asarray(self.row_hi))]
            if m
            else []
        )
        integrality = np.zeros(n) if relax else np.asarray(self.integer)
        return milp(
            np.asarray(self.cost, float),
            integrality=integrality,
            bounds=Bounds(
                np.asarray(self.lb, float) if lb is None else lb,
                np.asarray(self.ub, float) if ub is None else ub,
            ),
            constraints=constraints,
            options={
                "time_limit": max(time_limit, 1.0),
                "mip_rel_gap": rel_gap,
                "presolve": presolve,
            },
        )

    def solve_lp(self, time_limit: float) -> tuple[Any, np.ndarray | None]:
        """The LP relaxation with its reduced costs (None when it has no solution)."""
        matrix = self.matrix().tocsr()
        lo, hi = np.asarray(self.row_lo, float), np.asarray(self.row_hi, float)
        eq = lo == hi
        upper = ~eq & np.isfinite(hi)
        lower = ~eq & np.isfinite(lo)
        a_ub = None
        if upper.any() or lower.any():
            # The upper rows, then the lower rows negated, in one row selection.
            a_ub = matrix[np.concatenate([np.flatnonzero(upper), np.flatnonzero(lower)])]
            n_upper = int(np.diff(matrix.indptr)[upper].sum())
            np.negative(a_ub.data[n_upper:], out=a_ub.data[n_upper:])
        res = linprog(
            np.asarray(self.cost, float),
            A_ub=a_ub,
            b_ub=np.concatenate([hi[upper], -lo[lower]]) if (upper.any() or lower.any()) else None,
            A_eq=matrix[eq] if eq.any() else None,
            b_eq=lo[eq] if eq.any() else None,
            bounds=np.column_stack([np.asarray(self.lb, float), np.asarray(self.ub, float)]),
            method="highs",
            # Presolve only slows this program down: few rows, nothing redundant.
            options={"presolve": False, "time_limit": max(time_limit, 1.0)},
        )
        if res.status != 0 or res.x is None:
            return res, None
        return res, np.asarray(res.lower.marginals, float)

    def solve_restricted(
        self,
        time_limit: float,
        rel_gap: float,
        lb: np.ndarray,
        ub: np.ndarray,
        matrix: sparse.csc_array | None = None,
    ) -> Any:
        """The integer program with the columns whose bounds coincide left out (their
        values moved into the row bounds): HiGHS's presolve otherwise spends most of the
        time of a small neighbourhood removing them. Returns milp's result, with x and
        fun over all columns."""
        if matrix is None:
            matrix = self.matrix().tocsc()
        free = ub > lb
        x_fixed = np.where(free, 0.0, lb)
        shift = matrix @ x_fixed
        sub = matrix[:, free].tocsr()
        lo = np.asarray(self.row_lo, float) - shift
        hi = np.asarray(self.row_hi, float) - shift
        used = np.diff(sub.indptr) > 0
        cost = np.asarray(self.cost, float)
        if np.any(lo[~used] > 1e-7) or np.any(hi[~used] < -1e-7):
            return SimpleNamespace(x=None, fun=math.inf, status=2, mip_gap=0.0)
        if not free.any():
            return SimpleNamespace(x=x_fixed, fun=float(cost @ x_fixed), status=0, mip_gap=0.0)
        res = milp(
            cost[free],
            integrality=np.asarray(self.integer)[free],
            bounds=Bounds(lb[free], ub[free]),
            constraints=[LinearConstraint(sub[used], lo[used], hi[used])] if used.any() else [],
            options={"time_limit": max(time_limit, 1.0), "mip_rel_gap": rel_gap},
        )
        if res.x is not None:
            x = x_fixed.copy()
            x[free] = res.x
            res.x = x
            res.fun = float(cost @ x)
        return res


@dataclass
class _Model:
    program: _Program
    a: dict[tuple[int, int], int]  # (reviewer, group) -> column
    u: dict[int, list[int]]  # group -> evenness columns
    excess: dict[int, int]  # reviewer -> balance excess column
    max_excess: int | None
    cost_bound: float


def _build(
    prep: _Prepared,
    *,
    mode: str,
    rng: np.random.Generator,
    excess_caps: tuple[int, int] | None = None,
) -> _Model:
    """mode: "solve" (rules hard, preferences in the objective), "diagnose" (a slack on
    every rule, balance left free), "balance" (rules hard, minimise the balance excess).
    `excess_caps` (max per reviewer, total) bounds the excess in a "solve" after "balance".
    """
    params = prep.params
    reviewers = prep.inputs.reviewers
    p = _Program()
    relax = mode == "diagnose"
    total_max = sum(reviewers[r].max_load for r in prep.active)
    noise_scale = 0.45 / (total_max + 1)
    a: dict[tuple[int, int], int] = {}
    by_group: dict[int, list[int]] = defaultdict(list)
    fixed_rg: Counter[tuple[int, int]] = Counter()
    for r, i in prep.fixed_pairs:
        fixed_rg[(r, prep.group_of_idea[i])] += 1

    def slack(row_cols: list[int], row_coefs: list[float], sign: int, family: str, subj: Any):
        col = p.var(cost=1.0)
        p.slacks.append((col, family, subj, sign))
        row_cols.append(col)
        row_coefs.append(float(sign))

    for r in prep.active:
        for g, (rank, cap) in prep.eligible[r].items():
            f = fixed_rg[(r, g)]
            hi = cap if rank is not None else f
            cost = 0.0
            if mode == "solve":
                cost = params.rank_weight * (rank or 0) + noise_scale * rng.random()
            col = p.var(cost=cost, lb=f, ub=max(hi, f), integer=True)
            a[(r, g)] = col
            by_group[g].append(r)

    excess: dict[int, int] = {}
    max_col = None
    if mode == "balance":
        max_col = p.var(cost=float(len(prep.active) + 1), integer=False)
    for r in prep.active:
        rev = reviewers[r]
        cols = [a[(r, g)] for g in prep.eligible[r]]
        if not cols:
            continue
        # Load.
        rc, cf = list(cols), [1.0] * len(cols)
        if relax:
            slack(rc, cf, +1, "load_under", r)
            slack(rc, cf, -1, "load_over", r)
        p.row(rc, cf, rev.load_min, rev.max_load)
        # Human and AI.
        if params.require_human_and_ai:
            for kind in KINDS:
                kc = [a[(r, g)] for g in prep.eligible[r] if _group_has_kind(prep, g, kind)]
                kf = [1.0] * len(kc)
                if relax:
                    slack(kc, kf, +1, f"{kind}_idea", r)
                if kc:
                    p.row(kc, kf, 1, math.inf)
        # Condition counts.
        avail = prep.cond_avail[r]
        count_cols = {
            c: [a[(r, g)] for g in prep.eligible[r] if c in prep.groups[g].signature] for c in avail
        }
        # Seeing too few conditions forces a zero count, hence every count ≤ the spread;
        # when the load exceeds what that allows, the balance rows imply the rule and the
        # binaries that would state it only slow the solver down.
        spread_cap = params.max_condition_spread + (
            excess_caps[0] if excess_caps is not None else 0
        )
        implied = (
            mode == "solve"
            and len(avail) >= params.min_conditions
            and rev.load_min > (params.min_conditions - 1) * spread_cap
        )
        if params.min_conditions > 1 and avail and not implied:
            ys = []
            for c in avail:
                y = p.var(lb=0, ub=1, integer=True)
                ys.append(y)
                p.row([y, *count_cols[c]], [1.0] + [-1.0] * len(count_cols[c]), -math.inf, 0)
            yc, yf = list(ys), [1.0] * len(ys)
            if relax:
                slack(yc, yf, +1, "conditions", r)
            p.row(yc, yf, params.min_conditions, math.inf)
        # Balance: count_c − count_d ≤ spread for every ordered pair of offered conditions.
        if len(avail) >= 2 and mode != "diagnose":
            e = None
            if mode == "balance" or excess_caps is not None:
                excess_cap = float(excess_caps[0]) if excess_caps is not None else math.inf
                e = p.var(cost=1.0 if mode == "balance" else 0.0, lb=0, ub=excess_cap)
                excess[r] = e
                if max_col is not None:
                    p.row([max_col, e], [1.0, -1.0], 0, math.inf)
            for c, d in itertools.permutations(avail, 2):
                plus = [col for col in count_cols[c] if col not in count_cols[d]]
                minus = [col for col in count_cols[d] if col not in count_cols[c]]
                bc = plus + minus
                bf = [1.0] * len(plus) + [-1.0] * len(minus)
                if e is not None:
                    bc.append(e)
                    bf.append(-1.0)
                if bc:
                    p.row(bc, bf, -math.inf, params.max_condition_spread)
    if excess_caps is not None and excess:
        p.row(list(excess.values()), [1.0] * len(excess), -math.inf, excess_caps[1])

    # Idea side, per group: minimum, maximum, and the convex evenness cost.
    u: dict[int, list[int]] = {}
    span = params.max_reviews - params.min_reviews
    cost_bound = 0.0
    group_total: dict[int, int] = {}
    for g, grp in enumerate(prep.groups):
        cols = [a[(r, g)] for r in by_group.get(g, [])]
        n = len(grp.ideas)
        # The group's total as a column keeps the conflict rows below short.
        tot = p.var()
        group_total[g] = tot
        p.row([tot, *cols], [1.0] + [-1.0] * len(cols), 0, 0)
        cols = [tot]
        base = int(np.maximum(prep.fixed_per_idea[grp.ideas], params.min_reviews).sum())
        rc, cf = list(cols), [1.0] * len(cols)
        if relax:
            slack(rc, cf, +1, "group_under", g)
        p.row(rc, cf, base, math.inf)
        rc, cf = list(cols), [1.0] * len(cols)
        if relax:
            slack(rc, cf, -1, "group_over", g)
        p.row(rc, cf, -math.inf, params.max_reviews * n)
        if mode == "solve" and span > 0 and params.evenness_weight:
            us = [
                p.var(cost=float(params.evenness_weight * k), lb=0, ub=n)
                for k in range(1, span + 1)
            ]
            u[g] = us
            cost_bound += params.evenness_weight * span * n * span
            p.row(us + cols, [1.0] * len(us) + [-1.0] * len(cols), -base, math.inf)

    # Conflicts of interest, counted per (group, institution): reviewers of institution J
    # need enough ideas not from J, and ideas from J need enough reviewers not from J.
    for g, grp in enumerate(prep.groups):
        members = by_group.get(g, [])
        if not members:
            continue
        idea_insts = Counter(k for i in grp.ideas for k in prep.idea_keys[i])
        rev_insts = {k for r in members for k in prep.reviewer_keys[r]}
        base = int(np.maximum(prep.fixed_per_idea[grp.ideas], params.min_reviews).sum())
        for inst in rev_insts & set(idea_insts):
            inside = [r for r in members if inst in prep.reviewer_keys[r]]
            inside_max = sum(p.ub[a[(r, g)]] for r in inside)
            allowed = len(grp.ideas) - idea_insts[inst]
            fixed_in = sum(
                1
                for r in inside
                for i in prep.fixed_by_reviewer.get(r, ())
                if prep.group_of_idea[i] == g and inst in prep.idea_keys[i]
            )
            # Rows that cannot bind are left out: at 100× there are thousands of pairs.
            if inside_max > params.max_reviews * allowed + fixed_in:
                rc = [a[(r, g)] for r in inside]
                cf = [1.0] * len(rc)
                if relax:
                    slack(rc, cf, -1, "conflict_over", (g, inst))
                p.row(rc, cf, -math.inf, params.max_reviews * allowed + fixed_in)
            need_outside = params.min_reviews * idea_insts[inst] - fixed_in
            if base - inside_max < need_outside:
                rc = [group_total[g]] + [a[(r, g)] for r in inside]
                cf = [1.0] + [-1.0] * len(inside)
                if relax:
                    slack(rc, cf, +1, "conflict_under", (g, inst))
                p.row(rc, cf, need_outside, math.inf)

    cost_bound += (
        params.rank_weight
        * total_max
        * max((len(reviewers[r].topics) for r in prep.active), default=1)
    )
    return _Model(p, a, u, excess, None, cost_bound)


def _binding_conflicts(prep: _Prepared) -> list[tuple[int, str, float, float]]:
    """(group, institution, cap on reviews from it, need from outside it) for the
    conflict rows that can bind; the others are implied by loads and group minimums."""
    params = prep.params
    reviewers = prep.inputs.reviewers
    # Per group and institution of its reviewers: the most they can take from the
    # group, and those of them with submitted reviews (in reviewer order).
    inside_max: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    inside_fixed: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for r in prep.active:
        keys = prep.reviewer_keys[r]
        if not keys:
            continue
        load = reviewers[r].max_load
        has_fixed = r in prep.fixed_by_reviewer
        for g, (_, cap) in prep.eligible[r].items():
            room = cap if cap < load else load
            by_inst = inside_max[g]
            for k in keys:
                by_inst[k] += room
                if has_fixed:
                    inside_fixed[g][k].append(r)
    out = []
    for g, grp in enumerate(prep.groups):
        idea_insts = Counter(k for i in grp.ideas for k in prep.idea_keys[i])
        base = int(np.maximum(prep.fixed_per_idea[grp.ideas], params.min_reviews).sum())
        group_max = inside_max.get(g, {})
        for inst in sorted(group_max.keys() & idea_insts.keys()):
            fixed_in = sum(
                1
                for r in inside_fixed.get(g, {}).get(inst, ())
                for i in prep.fixed_by_reviewer[r]
                if prep.group_of_idea[i] == g and inst in prep.idea_keys[i]
            )
            cap = params.max_reviews * (len(grp.ideas) - idea_insts[inst]) + fixed_in
            need_outside = params.min_reviews * idea_insts[inst] - fixed_in
            if group_max[inst] > cap or base - group_max[inst] < need_outside:
                out.append((g, inst, float(cap), float(need_outside)))
    return out


def _compositions(total: int, lows: list[int], caps: list[int]) -> list[tuple[int, ...]]:
    """All vectors v with lows ≤ v ≤ caps summing to total."""
    if not lows:
        return [()] if total == 0 else []
    out: list[tuple[int, ...]] = []
    rest_low, rest_cap = sum(lows[1:]), sum(caps[1:])
    for v in range(max(lows[0], total - rest_cap), min(caps[0], total - rest_low) + 1):
        out.extend((v, *tail) for tail in _compositions(total - v, lows[1:], caps[1:]))
    return out


def _enumerate_patterns(
    prep: _Prepared, entries: list[tuple[int, int | None, int, int]], lmin: int, lmax: int
) -> list[tuple[int, ...]]:
    """All per-group count vectors one reviewer may get. entries: (group, rank, cap, fixed).

    The rules see only how many ideas of each condition set the reviewer gets, so those
    totals are enumerated and checked first, then split over the topics offering them.
    """
    params = prep.params
    sigs = sorted({prep.groups[g].signature for g, *_ in entries})
    slots = {
        sig: [k for k, (g, *_) in enumerate(entries) if prep.groups[g].signature == sig]
        for sig in sigs
    }
    caps = [cap if rank is not None else fixed for _, rank, cap, fixed in entries]
    lows = [fixed for *_, fixed in entries]
    sig_low = [sum(lows[k] for k in slots[sig]) for sig in sigs]
    sig_cap = [sum(caps[k] for k in slots[sig]) for sig in sigs]
    avail = sorted({c for sig in sigs for c in sig})
    sig_kinds = [{_kind_of(prep, c) for c in sig} for sig in sigs]
    out: list[tuple[int, ...]] = []
    for total in range(lmin, lmax + 1):
        for b in _compositions(total, sig_low, sig_cap):
            counts = dict.fromkeys(avail, 0)
            kinds: set[str] = set()
            for sig, v, kk in zip(sigs, b, sig_kinds, strict=True):
                if v:
                    kinds |= kk
                    for c in sig:
                        counts[c] += v
            values = list(counts.values())
            if len(values) >= 2 and max(values) - min(values) > params.max_condition_spread:
                continue
            if sum(1 for v in values if v) < params.min_conditions:
                continue
            if params.require_human_and_ai and not (HUMAN in kinds and AI in kinds):
                continue
            splits = [
                _compositions(v, [lows[k] for k in slots[sig]], [caps[k] for k in slots[sig]])
                for sig, v in zip(sigs, b, strict=True)
            ]
            for combo in itertools.product(*splits):
                vec = [0] * len(entries)
                for sig, part in zip(sigs, combo, strict=True):
                    for k, v in zip(slots[sig], part, strict=True):
                        vec[k] = v
                out.append(tuple(vec))
    return out


@dataclass
class _PatternModel:
    program: _Program
    # (members, group order, patterns, first column): reviewers of one type share these.
    types: list[tuple[list[int], list[int], list[tuple[int, ...]], int]]
    cost_bound: float


def _build_patterns(
    prep: _Prepared, rng: np.random.Generator, cut_groups: frozenset[int] = frozenset()
) -> _PatternModel | None:
    """The program over whole per-reviewer patterns (a Dantzig–Wolfe reformulation):
    its LP relaxation is the convex hull of each reviewer's feasible count vectors, so it
    is nearly integral and HiGHS solves it at the root, where the per-(reviewer, group)
    program spends seconds cutting off fractional condition balances.

    Reviewers who are interchangeable (same topics, load, capacities, relevant
    institution, nothing submitted) form one type whose pattern counts are integers.
    Returns None when some reviewer has no feasible pattern (the caller diagnoses).
    """
    params = prep.params
    reviewers = prep.inputs.reviewers
    binding = _binding_conflicts(prep)
    relevant = {inst for _, inst, _, _ in binding}
    for g in cut_groups:
        relevant.update(k for i in prep.groups[g].ideas for k in prep.idea_keys[i])
    types: dict[Any, list[int]] = defaultdict(list)
    entries_of: dict[Any, list[tuple[int, int | None, int, int]]] = {}
    fixed_rg: Counter[tuple[int, int]] = Counter()
    for r, i in prep.fixed_pairs:
        fixed_rg[(r, prep.group_of_idea[i])] += 1
    for r in prep.active:
        rev = reviewers[r]
        load = rev.max_load
        if r in prep.fixed_by_reviewer:
            entries = sorted(
                (
                    (g, rank, min(cap, load), fixed_rg.get((r, g), 0))
                    for g, (rank, cap) in prep.eligible[r].items()
                ),
                key=lambda e: (e[1] if e[1] is not None else 1 << 30, e[0]),
            )
        else:
            # Without submitted reviews every entry has a rank, and `_prepare` lists
            # them by rank, then group: already in the order the sort above gives.
            entries = [
                (g, rank, cap if cap < load else load, 0)
                for g, (rank, cap) in prep.eligible[r].items()
            ]
        key = (
            tuple(entries),
            rev.load_min,
            load,
            prep.reviewer_keys[r] & relevant,  # a frozenset
            r if r in prep.fixed_by_reviewer else None,
        )
        members = types[key]
        if not members:
            entries_of[key] = entries
        members.append(r)
    shape_cache: dict[Any, _ShapeArrays] = {}
    p = _Program()
    total_max = sum(reviewers[r].max_load for r in prep.active)
    noise_scale = 0.45 / (total_max + 1)
    # g -> chunks of (columns, counts); (g, institution) -> the same for its reviewers.
    group_cols: dict[int, list[tuple[np.ndarray, np.ndarray]]] = defaultdict(list)
    inst_cols: dict[tuple[int, str], list[tuple[np.ndarray, np.ndarray]]] = defaultdict(list)
    type_list = []
    cost_bound = 0.0
    for key, members in types.items():
        entries = entries_of[key]
        shape = (
            tuple(
                (
                    rank,
                    prep.groups[g].signature,
                    cap,
                    fixed,
                    frozenset(_kind_of(prep, c) for c in prep.groups[g].signature),
                )
                for g, rank, cap, fixed in entries
            ),
            key[1],
            key[2],
        )
        if shape not in shape_cache:
            shape_cache[shape] = _shape_arrays(
                _enumerate_patterns(prep, entries, key[1], key[2]), entries, params
            )
        patterns, costs, by_entry = shape_cache[shape]
        if not patterns:
            return None
        first = len(p.cost)
        # Per pattern: its topic-rank cost (integers), plus the tie-breaking noise, drawn
        # in the same order as one draw per pattern would.
        cost_bound = max(cost_bound, float(costs.max()))
        noise = rng.random(len(patterns))
        p.add_vars(
            (costs + noise_scale * noise).tolist(),
            lb=0,
            ub=len(members),
            integer=True,
        )
        for (g, *_), (used, taken) in zip(entries, by_entry, strict=True):
            chunk = (first + used, taken)
            group_cols[g].append(chunk)
            for inst in key[3]:
                inst_cols[(g, inst)].append(chunk)
        n_pat = len(patterns)
        p.row_array(np.arange(first, first + n_pat), np.ones(n_pat), len(members), len(members))
        type_list.append((members, [g for g, *_ in entries], patterns, first))
    cost_bound *= len(prep.active)
    span = params.max_reviews - params.min_reviews

    def joined(chunks: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
        if not chunks:
            return np.zeros(0, np.int64), np.zeros(0, float)
        return (
            np.concatenate([c for c, _ in chunks]),
            np.concatenate([v for _, v in chunks]).astype(float),
        )

    for g, grp in enumerate(prep.groups):
        n = len(grp.ideas)
        base = int(np.maximum(prep.fixed_per_idea[grp.ideas], params.min_reviews).sum())
        g_cols, coefs = joined(group_cols.get(g, []))
        p.row_array(g_cols, coefs, base, params.max_reviews * n)
        if span > 0 and params.evenness_weight:
            us = [
                p.var(cost=float(params.evenness_weight * k), lb=0, ub=n)
                for k in range(1, span + 1)
            ]
            cost_bound += params.evenness_weight * span * n * span
            p.row_array(
                np.concatenate([np.asarray(us, np.int64), g_cols]),
                np.concatenate([np.ones(len(us)), -coefs]),
                -base,
                math.inf,
            )
    for g, inst, cap, need_outside in binding:
        in_cols, in_coefs = joined(inst_cols.get((g, inst), []))
        g_cols, coefs = joined(group_cols.get(g, []))
        if len(in_cols):
            p.row_array(in_cols, in_coefs, -math.inf, cap)
        # Reviews from outside the institution = group total − reviews from inside (a
        # column appears at most once in each, and the inside's are the group's).
        outside = coefs.copy()
        where = np.full(len(p.cost), -1, dtype=np.int64)
        where[g_cols] = np.arange(len(g_cols))
        outside[where[in_cols]] -= in_coefs
        keep = outside != 0
        p.row_array(g_cols[keep], outside[keep], need_outside, math.inf)
    for g in sorted(cut_groups):
        _add_hall_cuts(prep, p, g, type_list, types)
    return _PatternModel(p, type_list, cost_bound)


# A shape's patterns, their topic-rank costs, and per entry (used patterns, ideas taken).
_ShapeArrays = tuple[list[tuple[int, ...]], np.ndarray, list[tuple[np.ndarray, np.ndarray]]]


def _shape_arrays(
    patterns: list[tuple[int, ...]],
    entries: list[tuple[int, int | None, int, int]],
    params: Parameters,
) -> _ShapeArrays:
    """What reviewer types of one shape share: their patterns, each pattern's topic-rank
    cost, and per entry the patterns that use it (ascending) with how many ideas they
    take from it."""
    counts = np.array(patterns, dtype=np.int64).reshape(len(patterns), len(entries))
    ranks = np.array([rank or 0 for _, rank, _, _ in entries], dtype=np.int64)
    costs = params.rank_weight * (counts @ ranks)
    entry_of, used = np.nonzero(counts.T)
    taken = counts.T[entry_of, used]
    bounds = np.searchsorted(entry_of, np.arange(len(entries) + 1)).tolist()
    by_entry = [
        (used[bounds[j] : bounds[j + 1]], taken[bounds[j] : bounds[j + 1]])
        for j in range(len(entries))
    ]
    return patterns, costs, by_entry


def _add_hall_cuts(
    prep: _Prepared,
    p: _Program,
    g: int,
    type_list: list[tuple[list[int], list[int], list[tuple[int, ...]], int]],
    types: Mapping[Any, list[int]],
) -> None:
    """Hall's condition on unions of author-institution classes of group g, written over
    whole patterns (where it is linear): ideas in X can take at most max·|X| reviews but
    receive at least what reviewers cannot put outside X, and need min·|X| reviews but get
    at most what reviewers can put inside X. Added only after placement failed for g."""
    params = prep.params
    ideas = prep.groups[g].ideas
    classes: dict[frozenset[str], list[int]] = defaultdict(list)
    for i in ideas:
        classes[prep.idea_keys[i]].append(i)
    class_list = list(classes.items())
    if len(class_list) > 8:
        class_list = sorted(class_list, key=lambda kv: -len(kv[1]))[:8]
    for size in range(1, len(class_list) + 1):
        for chosen in itertools.combinations(class_list, size):
            x_ideas = {i for _, members in chosen for i in members}
            forced_row: list[tuple[int, float]] = []
            reach_row: list[tuple[int, float]] = []
            for members, groups, patterns, first in type_list:
                if g not in groups:
                    continue
                k = groups.index(g)
                keys = prep.reviewer_keys[members[0]]
                allowed = {i for i in ideas if not (prep.idea_keys[i] & keys)}
                outside = len(allowed - x_ideas)
                inside = len(allowed & x_ideas)
                for j, pat in enumerate(patterns):
                    v = pat[k]
                    if v > outside:
                        forced_row.append((first + j, float(v - outside)))
                    if v and inside:
                        reach_row.append((first + j, float(min(v, inside))))
            fixed = int(sum(prep.fixed_per_idea[i] for i in x_ideas))
            if forced_row:
                p.row(
                    [c for c, _ in forced_row],
                    [v for _, v in forced_row],
                    -math.inf,
                    params.max_reviews * len(x_ideas),
                )
            p.row(
                [c for c, _ in reach_row],
                [v for _, v in reach_row],
                params.min_reviews * len(x_ideas) - fixed,
                math.inf,
            )


def _solve_patterns(
    model: _PatternModel, deadline: float, rel_gap: float, stats: dict[str, Any]
) -> Any:
    """LP relaxation, then the integer program on ever wider neighbourhoods of the LP
    solution until one provably reaches the optimum in every real term:

    1. "lp+fix": the LP's support, its integral parts fixed;
    2. "lp+local": types whose LP count is fractional may also use patterns one review
       away from those the LP gives them;
    3. "lp+neighbourhood": types whose LP count is fractional may use any pattern;
    4. "lp+reduced": every type may use any pattern;
    5. "full": the whole program.

    Objective terms other than the tie-breaking noise are integers and the noise sums to
    < 0.45, so a solution within 0.55 of the LP bound is optimal in every real term. By LP
    duality every solution costs at least the LP bound plus the reduced cost of each
    column it uses beyond the column's LP value, so columns (patterns) whose reduced cost
    exceeds 0.55 cannot appear in such a solution and stages 2–4 leave them out: stage
    4 is then as good as the full program for that question, on about a third of its
    columns at the Si et al. scale. Columns whose bounds coincide are removed before HiGHS
    sees them (its presolve otherwise spends longer on them than on the search).

    The LP of the pattern program is nearly integral, and HiGHS spends far longer
    presolving and searching the full program (tens of seconds at 10×) than solving the
    LP and a few hundred residual columns (a few tenths of a second at the Si et al.
    scale, where stage 1 or 2 nearly always suffices)."""
    prog = model.program
    lp, reduced = prog.solve_lp(deadline - time.perf_counter())
    if reduced is None:
        stats["lp"] = "infeasible"
        lp.x = None
        return lp
    x = np.asarray(lp.x, float)
    integer = np.asarray(prog.integer) == 1
    lb = np.asarray(prog.lb, float)
    ub = np.asarray(prog.ub, float)
    matrix = prog.matrix().tocsc()
    support = (x > 1e-7) | ~integer
    # A margin below 0.55 for the LP's tolerances: dropping fewer columns is always safe.
    priced_out = integer & ~support & (reduced > 0.55 + 1e-6)
    lb_fix = np.where(integer & support, np.floor(x + 1e-7), np.where(support, lb, 0.0))
    ub_fix = np.where(support, ub, 0.0)
    fractional = integer & (np.abs(x - np.round(x)) > 1e-7)
    stats["lp_fractional"] = int(np.sum(fractional))
    stats["lp_priced_out"] = int(np.sum(priced_out))
    lb_wide, ub_wide = lb_fix.copy(), ub_fix.copy()
    ub_local = ub_fix.copy()
    for _members, _groups, patterns, first in model.types:
        span = slice(first, first + len(patterns))
        if fractional[span].any():
            lb_wide[span] = lb[span]
            ub_wide[span] = np.where(priced_out[span], 0.0, ub[span])
            # Patterns one review away from a pattern the LP uses (one idea moved from
            # one group to another, or one added or removed).
            vecs = np.asarray(patterns, dtype=np.int64)
            used = vecs[support[span]]
            distance = np.abs(vecs[:, None, :] - used[None, :, :]).sum(axis=2).min(axis=1)
            ub_local[span] = np.where(distance <= 2, ub_wide[span], 0.0)
    ub_reduced = np.where(priced_out, 0.0, ub)
    stages = (
        ("lp+fix", lb_fix, ub_fix),
        ("lp+local", lb_wide, ub_local),
        ("lp+neighbourhood", lb_wide, ub_wide),
        ("lp+reduced", lb, ub_reduced),
    )
    best = None
    previous: tuple[np.ndarray, np.ndarray] | None = None
    for name, lo, hi in stages:
        if (
            previous is not None
            and np.array_equal(lo, previous[0])
            and np.array_equal(hi, previous[1])
        ):
            continue
        previous = (lo, hi)
        res = prog.solve_restricted(deadline - time.perf_counter(), rel_gap, lo, hi, matrix)
        if res.x is None:
            continue
        if res.fun - lp.fun < 0.55:
            stats["strategy"] = name
            res.status = 0
            return res
        if best is None or res.fun < best.fun:
            best = res
    stats["strategy"] = "full"
    full = prog.solve(deadline - time.perf_counter(), rel_gap, presolve=False)
    if full.x is None and best is not None:
        # Out of time: the best restricted solution, not proven optimal.
        best.status = 1
        return best
    return full


def _pattern_counts(
    model: _PatternModel, x: np.ndarray, rng: np.random.Generator
) -> dict[tuple[int, int], int]:
    """Hand each type's chosen patterns to its reviewers in a seeded random order."""
    counts: dict[tuple[int, int], int] = {}
    # Rounded half to even, as round() does.
    all_times = np.rint(np.asarray(x, float)).astype(np.int64)
    for members, groups, patterns, first in model.types:
        order = [members[k] for k in rng.permutation(len(members))]
        pos = 0
        chosen = all_times[first : first + len(patterns)]
        for k in np.flatnonzero(chosen > 0).tolist():
            pat = patterns[k]
            for _ in range(int(chosen[k])):
                r = order[pos]
                pos += 1
                for g, v in zip(groups, pat, strict=True):
                    if v:
                        counts[(r, g)] = v
    return counts


def _describe_slacks(prep: _Prepared, model: _Model, x: np.ndarray) -> list[Problem]:
    params = prep.params
    reviewers, ideas = prep.inputs.reviewers, prep.inputs.ideas
    problems: list[Problem] = []
    by_topic_under: Counter[str] = Counter()
    by_topic_over: Counter[str] = Counter()
    for col, family, subj, _sign in model.program.slacks:
        amount = int(round(x[col]))
        if amount <= 0:
            continue
        if family == "load_under":
            rev = reviewers[subj]
            problems.append(
                Problem(
                    "reviewer_load",
                    rev.id,
                    f"reviewer {rev.id} can be given at most {rev.load_min - amount} ideas "
                    f"within the other rules, {amount} short of their load of {rev.load_min}",
                    amount,
                )
            )
        elif family == "load_over":
            rev = reviewers[subj]
            problems.append(
                Problem(
                    "reviewer_load",
                    rev.id,
                    f"reviewer {rev.id} would have to take {_n(amount, 'more idea')} than their "
                    f"maximum load of {rev.max_load} for every idea to get "
                    f"{params.min_reviews} reviews",
                    amount,
                )
            )
        elif family in ("human_idea", "ai_idea"):
            rev = reviewers[subj]
            label = "human" if family == "human_idea" else "AI"
            problems.append(
                Problem(
                    family,
                    rev.id,
                    f"reviewer {rev.id} cannot be given a {label} idea without breaking "
                    "another rule (topics, load, review counts or conflicts)",
                    amount,
                )
            )
        elif family == "conditions":
            rev = reviewers[subj]
            problems.append(
                Problem(
                    "conditions",
                    rev.id,
                    f"reviewer {rev.id} can see only "
                    f"{_n(params.min_conditions - amount, 'condition')} within the other "
                    f"rules; {params.min_conditions} are required",
                    amount,
                )
            )
        elif family == "balance":
            rev = reviewers[subj]
            problems.append(
                Problem(
                    "balance",
                    rev.id,
                    f"reviewer {rev.id}'s condition counts cannot be kept within "
                    f"{params.max_condition_spread} of each other; they differ by "
                    f"{params.max_condition_spread + amount} at best",
                    amount,
                )
            )
        elif family == "group_under":
            by_topic_under[prep.groups[subj].topic] += amount
        elif family == "group_over":
            by_topic_over[prep.groups[subj].topic] += amount
        elif family in ("conflict_over", "conflict_under"):
            g, inst = subj
            grp = prep.groups[g]
            what = f"{grp.topic} ({_topic_list(grp.signature)})"
            if family == "conflict_over":
                message = (
                    f"reviewers from {inst} need {_n(amount, 'more review slot')} on {what} "
                    f"ideas not written at {inst} than those ideas can take"
                )
            else:
                message = (
                    f"ideas from {inst} in {what} lack {_n(amount, 'review')} from reviewers "
                    f"outside {inst}"
                )
            problems.append(Problem("conflict", grp.topic, message, amount))
    n_topic = Counter(idea.topic for idea in ideas)
    for topic, amount in sorted(by_topic_under.items()):
        need = params.min_reviews * n_topic[topic]
        problems.append(
            Problem(
                "topic_capacity",
                topic,
                f"topic {topic} needs ≥ {_n(need, 'review')} ({_n(n_topic[topic], 'idea')} × "
                f"{params.min_reviews}), but only {need - amount} can be placed there within "
                f"the reviewers' loads, topics and balance rules ({amount} short)",
                amount,
            )
        )
    for topic, amount in sorted(by_topic_over.items()):
        room = params.max_reviews * n_topic[topic]
        problems.append(
            Problem(
                "topic_capacity",
                topic,
                f"reviewers' loads push {room + amount} reviews onto topic {topic}, whose "
                f"{_n(n_topic[topic], 'idea')} take at most {room} ({amount} too many)",
                amount,
            )
        )
    return problems


# --------------------------------------------------------------------------- stage 2


def _water_levels(
    total: int, fixed: np.ndarray, lo_bound: int, hi_bound: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per-idea final review count bounds as even as `total` allows given fixed counts."""
    level = lo_bound
    while level < hi_bound and np.maximum(fixed, level + 1).sum() <= total:
        level += 1
    lo = np.maximum(fixed, level)
    hi = np.minimum(np.maximum(fixed, level + 1), max(hi_bound, 0))
    hi = np.maximum(hi, lo)
    return lo, hi


# From how many (reviewer, idea) cells a group is placed over a band of them first (see
# `_band_cells`): the flow over every allowed cell costs time in proportion to the cells,
# which at conference scale (millions per group) is most of the solve; below this
# (every group at the Si et al. scale, and at ten times it) the placement is the flow
# over every allowed cell, as it always was.
_BAND_FROM_CELLS = 100_000

# Candidate (reviewer, idea) cells of one group, row-major: per reviewer how many, and
# their ideas (columns), ascending within each reviewer.
_Cells = tuple[np.ndarray, np.ndarray]


def _all_cells(allowed: np.ndarray) -> _Cells:
    """Every allowed cell."""
    return allowed.sum(axis=1), np.nonzero(allowed)[1]


def _band_cells(demand: np.ndarray, allowed: np.ndarray, hi: np.ndarray) -> _Cells:
    """A few allowed cells per reviewer and per idea, among which a placement nearly
    always exists: reviewer k (in the shuffled order) is offered the ideas that follow
    the `demand[:k].sum()`-th one cyclically (in the shuffled idea order), three times
    as many as they need plus two. Without conflicts or submitted reviews those windows
    hold the round-robin placement, which gives every idea the even review count; the
    slack is room to route around conflicts of interest. A reviewer or an idea whose
    window holds too few allowed cells (fewer than their need plus two) is offered all
    of theirs. These are a subset of the allowed cells: when no placement exists among
    them, the caller asks the flow over all of them."""
    n_r, n_i = allowed.shape
    width = np.minimum(3 * demand + 2, n_i)
    first = np.cumsum(width) - width
    start = (np.cumsum(demand) - demand) % n_i
    rows = np.repeat(np.arange(n_r), width)
    cols = (np.repeat(start - first, width) + np.arange(int(width.sum()))) % n_i
    keep = allowed[rows, cols]
    rows, cols = rows[keep], cols[keep]
    row_short = np.flatnonzero(np.bincount(rows, minlength=n_r) < demand + 2)
    col_short = np.flatnonzero((np.bincount(cols, minlength=n_i) < hi + 2) & (hi > 0))
    if len(row_short) or len(col_short):
        extra_r, extra_c = np.nonzero(allowed[row_short])
        more_r, more_c = np.nonzero(allowed[:, col_short])
        rows = np.concatenate([rows, row_short[extra_r], more_r])
        cols = np.concatenate([cols, extra_c, col_short[more_c]])
    codes = np.sort(rows.astype(np.int64) * n_i + cols)
    codes = codes[np.concatenate([[True], codes[1:] != codes[:-1]])]
    return np.bincount(codes // n_i, minlength=n_r), codes % n_i


def _flow_with_bounds(
    demand: np.ndarray, cells: _Cells, n_i: int, lo: np.ndarray, hi: np.ndarray
) -> np.ndarray | None:
    """Choose candidate (reviewer, idea) cells: row sums = demand, column sums in
    [lo, hi].

    Lower bounds are removed the textbook way: a super source feeds each idea's lower
    bound past it, and a circulation edge returns the rest.
    """
    n_r = len(demand)
    need = int(demand.sum())
    if lo.sum() > need or hi.sum() < need:
        return None
    if need == 0:
        return np.zeros((0, 2), dtype=np.int64)
    t, sink = 1 + n_r + n_i, 2 + n_r + n_i
    size = sink + 1
    demand = demand.astype(np.int64)
    spare, low = (hi - lo).astype(np.int64), lo.astype(np.int64)
    low_total = int(low.sum())
    # The graph is written straight in canonical CSR order (rows ascending, each row's
    # heads ascending, no duplicates, no zero capacities): source -> reviewers and t,
    # reviewer -> allowed ideas, idea -> t and sink, t -> sink.
    i32 = np.int32
    allowed_per_row, cell_cols = cells
    # Row-major: each reviewer's candidate ideas, ascending.
    idea_heads_of_reviewers = (cell_cols + (1 + n_r)).astype(i32)
    src_heads = np.flatnonzero(demand > 0) + 1
    src_caps = demand[src_heads - 1]
    if low_total > 0:
        src_heads = np.append(src_heads, t)
        src_caps = np.append(src_caps, low_total)
    idea_heads = np.column_stack([np.full(n_i, t), np.full(n_i, sink)]).ravel()
    idea_caps = np.column_stack([spare, low]).ravel()
    idea_keep = idea_caps > 0
    per_row = np.zeros(size, dtype=np.int64)
    per_row[0] = len(src_heads)
    per_row[1 : 1 + n_r] = allowed_per_row
    per_row[1 + n_r : t] = idea_keep.reshape(n_i, 2).sum(axis=1)
    per_row[t] = 1
    indptr = np.zeros(size + 1, dtype=np.int32)
    np.cumsum(per_row, out=indptr[1:])
    indices = np.concatenate(
        [
            src_heads.astype(i32),
            idea_heads_of_reviewers,
            idea_heads[idea_keep].astype(i32),
            np.array([sink], i32),
        ]
    )
    data = np.concatenate(
        [
            src_caps.astype(i32),
            np.ones(len(idea_heads_of_reviewers), i32),
            idea_caps[idea_keep].astype(i32),
            np.array([need], i32),
        ]
    )
    graph = sparse.csr_array((data, indices, indptr), shape=(size, size))
    graph.has_canonical_format = True
    result = maximum_flow(graph, 0, sink)
    if result.flow_value != need + low_total:
        return None
    # The (reviewer, idea) edges that carry flow, read straight from the flow's CSR
    # arrays (slicing the matrix converts it to CSC and back, twice per group).
    flow = result.flow
    indptr = np.asarray(flow.indptr)
    start, stop = int(indptr[1]), int(indptr[1 + n_r])
    cols = np.asarray(flow.indices[start:stop]) - (1 + n_r)
    rows = np.repeat(np.arange(n_r), np.diff(indptr[1 : 2 + n_r]))
    chosen = (np.asarray(flow.data[start:stop]) > 0) & (cols >= 0) & (cols < n_i)
    return np.column_stack([rows[chosen], cols[chosen]]).astype(np.int64)


def _place(
    prep: _Prepared, counts: dict[tuple[int, int], int], rng: np.random.Generator
) -> tuple[list[tuple[int, int]], list[str], list[Problem], list[int]]:
    """Turn per-(reviewer, group) counts into concrete (reviewer, idea) pairs."""
    params = prep.params
    notes: list[str] = []
    problems: list[Problem] = []
    failed: list[int] = []
    pairs: list[tuple[int, int]] = list(prep.fixed_pairs)
    fixed_set = set(prep.fixed_pairs)
    fixed_rg: Counter[tuple[int, int]] = Counter()
    for r, i in prep.fixed_pairs:
        fixed_rg[(r, prep.group_of_idea[i])] += 1
    by_group: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for (r, g), k in counts.items():
        d = k - fixed_rg[(r, g)] if fixed_rg else k
        if d > 0:
            by_group[g].append((r, d))
    for g, grp in enumerate(prep.groups):
        wanted = by_group.get(g, [])
        ideas = np.asarray(grp.ideas, dtype=np.int64)
        fixed = prep.fixed_per_idea[ideas]
        total = int(fixed.sum()) + sum(d for _, d in wanted)
        if not wanted:
            continue
        # Shuffling is where equally good assignments are drawn at random.
        r_order = rng.permutation(len(wanted))
        i_order = rng.permutation(len(ideas))
        revs = np.asarray([wanted[k][0] for k in r_order], dtype=np.int64)
        demand = np.asarray([wanted[k][1] for k in r_order], dtype=np.int64)
        ideas = ideas[i_order]
        fixed = fixed[i_order]
        allowed = np.ones((len(revs), len(ideas)), dtype=bool)
        inst_cols: dict[str, list[int]] = {}
        for col, i in enumerate(ideas.tolist()):
            for k in prep.idea_keys[i]:
                inst_cols.setdefault(k, []).append(col)
        rev_list = revs.tolist()
        if inst_cols:
            # Per institution, its reviewers' rows × its ideas' columns, in one step.
            inst_rows: dict[str, list[int]] = {}
            for row, r in enumerate(rev_list):
                for key in prep.reviewer_keys[r]:
                    if key in inst_cols:
                        inst_rows.setdefault(key, []).append(row)
            for key, rows in inst_rows.items():
                allowed[np.ix_(np.asarray(rows), np.asarray(inst_cols[key]))] = False
        if prep.fixed_by_reviewer:
            col_of = {i: c for c, i in enumerate(ideas.tolist())}
            for row, r in enumerate(rev_list):
                for i in prep.fixed_by_reviewer.get(r, ()):
                    if i in col_of:
                        allowed[row, col_of[i]] = False
        chosen = None
        lo, hi = _water_levels(total, fixed, params.min_reviews, params.max_reviews)
        attempts = [(lo, hi)]
        for widen in range(1, params.max_reviews - params.min_reviews + 1):
            attempts.append(
                (
                    np.maximum(np.maximum(lo - widen, params.min_reviews), fixed),
                    np.maximum(np.minimum(hi + widen, params.max_reviews), fixed),
                )
            )
        for step, (lo_k, hi_k) in enumerate(attempts):
            low, high = lo_k - fixed, hi_k - fixed
            n_i = len(ideas)
            if allowed.size >= _BAND_FROM_CELLS:
                cells = _band_cells(demand, allowed, high)
                chosen = _flow_with_bounds(demand, cells, n_i, low, high)
            if chosen is None:
                chosen = _flow_with_bounds(demand, _all_cells(allowed), n_i, low, high)
            if chosen is not None:
                if step:
                    notes.append(
                        f"{grp.topic} ({_topic_list(grp.signature)}): conflicts of interest "
                        f"left review counts up to {step} further from even"
                    )
                break
        if chosen is None:
            failed.append(g)
            problems.append(
                Problem(
                    "placement",
                    grp.topic,
                    f"conflicts of interest leave no way to place the reviews of topic "
                    f"{grp.topic} ({_topic_list(grp.signature)}) on individual ideas",
                )
            )
            continue
        new_pairs = zip(revs[chosen[:, 0]].tolist(), ideas[chosen[:, 1]].tolist(), strict=True)
        pairs.extend(p for p in new_pairs if p not in fixed_set) if fixed_set else pairs.extend(
            new_pairs
        )
    return pairs, notes, problems, failed


# --------------------------------------------------------------------------- public API


@contextlib.contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector, and resume it if it was running."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def solve_assignment(inputs: AssignmentInputs) -> AssignmentResult:
    """Assign reviewers to ideas under every rule; see the module docstring."""
    # A solve creates and drops hundreds of thousands of small tuples, lists and dicts
    # (patterns, counts, pairs) that form no reference cycles; left running, the cyclic
    # collector would walk all the live ones again and again (docs/measurements.md).
    # Whatever cyclic garbage a solve leaves is collected once it has resumed.
    with _cyclic_gc_paused():
        return _solve_assignment(inputs)


def _solve_assignment(inputs: AssignmentInputs) -> AssignmentResult:
    started = time.perf_counter()
    params = inputs.params
    seed = params.seed if params.seed is not None else secrets.randbits(32)
    rng = np.random.default_rng(seed)
    prep = _prepare(inputs)
    stats: dict[str, Any] = {}

    def infeasible(problems: Sequence[Problem], objective=None) -> AssignmentResult:
        return AssignmentResult(
            status="infeasible",
            pairs=(),
            reviewer_loads={},
            reviewer_condition_counts={},
            idea_review_counts={},
            seed=seed,
            solve_seconds=time.perf_counter() - started,
            objective=objective or {},
            problems=tuple(problems),
            stats=stats,
        )

    problems = prep.problems + _prechecks(prep)
    stats["precheck_seconds"] = round(time.perf_counter() - started, 4)
    if problems:
        return infeasible(problems)

    deadline = started + params.time_limit
    t0 = time.perf_counter()
    pmodel = _build_patterns(prep, rng)
    stats["build_seconds"] = round(time.perf_counter() - t0, 4)
    res = None
    counts: dict[tuple[int, int], int] = {}
    cut_groups: frozenset[int] = frozenset()
    placed = None
    for _round in range(4):
        if pmodel is None:
            break
        stats["model"] = "patterns"
        stats["variables"] = len(pmodel.program.cost)
        stats["constraints"] = len(pmodel.program.row_lo)
        stats["reviewer_types"] = len(pmodel.types)
        rel_gap = min(1e-4, 0.4 / (pmodel.cost_bound + 1.0))
        t0 = time.perf_counter()
        res = _solve_patterns(pmodel, deadline, rel_gap, stats)
        stats["milp_seconds"] = round(stats.get("milp_seconds", 0) + time.perf_counter() - t0, 4)
        if res.x is None:
            break
        counts = _pattern_counts(pmodel, res.x, rng)
        t0 = time.perf_counter()
        placed = _place(prep, counts, rng)
        stats["placement_seconds"] = round(time.perf_counter() - t0, 4)
        if not placed[3]:
            break
        # Conflicts of interest made some group's counts impossible to realise idea by
        # idea: add Hall cuts for those groups and solve again.
        cut_groups = cut_groups | frozenset(placed[3])
        stats["cut_groups"] = len(cut_groups)
        pmodel = _build_patterns(prep, rng, cut_groups)
    balance_excess: dict[str, int] = {}
    if res is None or res.x is None:
        if res is not None and res.status == 1:  # time limit without any solution
            return infeasible(
                [
                    Problem(
                        "input",
                        "",
                        f"no assignment was found within the time limit of "
                        f"{params.time_limit:g} s; raise the limit or check the inputs",
                    )
                ]
            )
        rel_gap = 1e-4
        diag = _build(prep, mode="diagnose", rng=rng)
        dres = diag.program.solve(max(deadline - time.perf_counter(), 5.0), 1e-4)
        if dres.x is None:
            return infeasible([Problem("input", "", "the rules could not be diagnosed")])
        found = _describe_slacks(prep, diag, dres.x)
        if found:
            return infeasible(found)
        # Every rule can hold except the balance of conditions per reviewer.
        bal = _build(prep, mode="balance", rng=rng)
        bres = bal.program.solve(max(deadline - time.perf_counter(), 5.0), 1e-6)
        if bres.x is None:
            return infeasible([Problem("balance", "", "the condition balance failed")])
        per = {r: int(round(bres.x[c])) for r, c in bal.excess.items()}
        worst, total = max(per.values(), default=0), sum(per.values())
        if params.balance == "strict":
            return infeasible(
                [
                    Problem(
                        "balance",
                        inputs.reviewers[r].id,
                        f"reviewer {inputs.reviewers[r].id}'s condition counts cannot be "
                        f"kept within {params.max_condition_spread} of each other; at best "
                        f"they differ by {params.max_condition_spread + k}",
                        k,
                    )
                    for r, k in per.items()
                    if k > 0
                ]
            )
        model = _build(prep, mode="solve", rng=rng, excess_caps=(worst, total))
        res = model.program.solve(max(deadline - time.perf_counter(), 5.0), rel_gap)
        if res.x is None:
            return infeasible([Problem("balance", "", "the condition balance failed")])
        balance_excess = {
            inputs.reviewers[r].id: int(round(res.x[c]))
            for r, c in model.excess.items()
            if round(res.x[c]) > 0
        }
        counts = {
            key: int(round(res.x[col])) for key, col in model.a.items() if round(res.x[col]) > 0
        }
        placed = _place(prep, counts, rng)
    assert placed is not None
    pair_idx, notes, place_problems, _failed = placed
    if place_problems:
        return infeasible(place_problems)

    ideas, reviewers = inputs.ideas, inputs.reviewers
    pairs = tuple(sorted((reviewers[r].id, ideas[i].id) for r, i in pair_idx))
    result = _summarise(prep, pair_idx)
    rank_hist: Counter[str] = Counter()
    rank_label: dict[int, dict[str, str]] = {}  # reviewer -> topic -> "1", "2", …
    # What `first_choice_share` counts, over indices: new reviews by reviewers who
    # chose two or more topics, and those from their first choice.
    fixed_pairs, first, chosen = set(prep.fixed_pairs), 0, 0
    for r, i in pair_idx:
        if r not in rank_label:
            ranked = dict.fromkeys(reviewers[r].topics)
            rank_label[r] = {t: str(k + 1) for k, t in enumerate(ranked)}
        labels = rank_label[r]
        label = labels.get(ideas[i].topic, "fixed")
        rank_hist[label] += 1
        if len(labels) >= 2 and label != "fixed" and (r, i) not in fixed_pairs:
            chosen += 1
            first += label == "1"
    review_hist = Counter(result["idea_review_counts"].values())
    evenness = sum(
        params.evenness_weight * k * (k + 1) // 2
        for k in (max(0, n - params.min_reviews) for n in result["idea_review_counts"].values())
    )
    rank_cost = sum(
        params.rank_weight * (int(k) - 1) * n for k, n in rank_hist.items() if k != "fixed"
    )
    if balance_excess:
        notes.append(
            f"condition balance relaxed for {counted(len(balance_excess), 'reviewer')}: "
            "no assignment "
            f"keeps them within {params.max_condition_spread}"
        )
    status = "optimal" if res.status == 0 else "time_limit"
    objective = {
        "value": float(res.fun),
        "topic_rank_cost": rank_cost,
        "evenness_cost": evenness,
        "reviews_by_topic_rank": dict(sorted(rank_hist.items())),
        "ideas_by_review_count": {str(k): v for k, v in sorted(review_hist.items())},
        "max_condition_spread": result["max_condition_spread"],
        "mip_gap": float(getattr(res, "mip_gap", 0.0) or 0.0),
        "first_choice_share": first / chosen if chosen else None,
    }
    return AssignmentResult(
        status=status,
        pairs=pairs,
        reviewer_loads=result["reviewer_loads"],
        reviewer_condition_counts=result["reviewer_condition_counts"],
        idea_review_counts=result["idea_review_counts"],
        seed=seed,
        solve_seconds=time.perf_counter() - started,
        objective=objective,
        notes=tuple(notes),
        balance_excess=balance_excess,
        stats=stats,
    )


def diagnose(inputs: AssignmentInputs) -> list[Problem]:
    """Plain-word reasons why the rules cannot all hold ([] when they can)."""
    result = solve_assignment(inputs)
    return list(result.problems)


def first_choice_share(inputs: AssignmentInputs, pairs: Iterable[tuple[str, str]]) -> float | None:
    """Of the new reviews by reviewers who chose two or more topics, the share from their
    first choice (None when there are none): about 0.5 under topic_choice="equal"."""
    topics = {rev.id: tuple(dict.fromkeys(rev.topics)) for rev in inputs.reviewers}
    topic_of = {idea.id: idea.topic for idea in inputs.ideas}
    fixed = set(inputs.fixed)
    first = total = 0
    for rid, iid in pairs:
        ranked = topics.get(rid, ())
        if len(ranked) < 2 or (rid, iid) in fixed or topic_of.get(iid) not in ranked:
            continue
        total += 1
        first += topic_of[iid] == ranked[0]
    return first / total if total else None


def _reviewer_rows(
    inputs: AssignmentInputs, by_reviewer: Mapping[str, list[str]]
) -> list[dict[str, Any]]:
    """One row per reviewer: load, condition counts, first/second choice, conflicts."""
    ideas = {idea.id: idea for idea in inputs.ideas}
    fixed = set(inputs.fixed)
    by_topic: dict[str, list[frozenset[str]]] = defaultdict(list)
    for i in inputs.ideas:
        by_topic[i.topic].append(institution_keys(i.institutions))
    rows: list[dict[str, Any]] = []
    for rev in inputs.reviewers:
        ranked = tuple(dict.fromkeys(rev.topics))
        got = by_reviewer.get(rev.id, [])
        counts = Counter(c for iid in got for c in set(ideas[iid].conditions))
        rank_of = [
            ranked.index(ideas[iid].topic) if ideas[iid].topic in ranked else -1 for iid in got
        ]
        keys = institution_keys([rev.institution], [rev.email])
        avoided = sum(1 for t in ranked for idea_keys in by_topic[t] if keys & idea_keys)
        rows.append(
            {
                "reviewer": rev.id,
                "topics": list(ranked),
                "load_min": rev.load_min,
                "load_max": rev.max_load,
                "assigned": len(got),
                "conditions": [counts.get(c, 0) for c in inputs.conditions],
                "first_choice": rank_of.count(0),
                "second_choice": sum(1 for k in rank_of if k >= 1),
                "fixed": sum(1 for iid in got if (rev.id, iid) in fixed),
                "conflicts_avoided": avoided,
            }
        )
    return rows


def preview_summary(inputs: AssignmentInputs, pairs: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """Plain tables of an assignment for an owner to read: per reviewer (load, conditions,
    first and second topic choice, conflicts avoided), per topic, per idea, and the
    histograms behind the preview's plots. JSON-ready: lists and str-keyed dicts only."""
    conds = list(inputs.conditions)
    by_reviewer: dict[str, list[str]] = defaultdict(list)
    per_idea: Counter[str] = Counter({i.id: 0 for i in inputs.ideas})
    for rid, iid in sorted(set(pairs)):
        by_reviewer[rid].append(iid)
        per_idea[iid] += 1
    reviewer_rows = _reviewer_rows(inputs, by_reviewer)
    topic_rows: dict[str, dict[str, int]] = {}
    for idea in inputs.ideas:
        row = topic_rows.setdefault(idea.topic, {"ideas": 0, "reviews": 0})
        row["ideas"] += 1
        row["reviews"] += per_idea[idea.id]
    idea_rows = [
        {
            "idea": i.id,
            "topic": i.topic,
            "conditions": list(i.conditions),
            "reviews": per_idea[i.id],
        }
        for i in sorted(inputs.ideas, key=lambda i: (i.topic, i.id))
    ]
    first = sum(r["first_choice"] for r in reviewer_rows if len(r["topics"]) >= 2)
    second = sum(r["second_choice"] for r in reviewer_rows if len(r["topics"]) >= 2)
    return {
        "conditions": conds,
        "reviewers": reviewer_rows,
        "topics": [{"topic": t, **row} for t, row in sorted(topic_rows.items())],
        "ideas": idea_rows,
        "reviews_per_idea": _histogram(per_idea.values()),
        "conditions_seen": _histogram(sum(1 for n in r["conditions"] if n) for r in reviewer_rows),
        "topic_choice": {"first": first, "second": second},
        "conflicts_avoided": sum(r["conflicts_avoided"] for r in reviewer_rows),
        "reviewers_with_conflicts": sum(1 for r in reviewer_rows if r["conflicts_avoided"]),
    }


def _histogram(values: Iterable[int]) -> list[list[int]]:
    """[[value, how many], …] in increasing value."""
    return [[k, n] for k, n in sorted(Counter(values).items())]


def _summarise(prep: _Prepared, pair_idx: Sequence[tuple[int, int]]) -> dict[str, Any]:
    """Loads, condition counts per reviewer and review counts per idea (ids as keys, in
    input order), and the widest spread of a reviewer's condition counts over the
    conditions on offer to them."""
    inputs = prep.inputs
    ideas, reviewers, conds = inputs.ideas, inputs.reviewers, list(inputs.conditions)
    column = {c: k for k, c in enumerate(conds)}
    member = np.zeros((len(ideas), len(conds)), dtype=np.int64)
    for i, idea in enumerate(ideas):
        for c in set(idea.conditions):
            if c in column:
                member[i, column[c]] = 1
    r_idx = np.fromiter((r for r, _ in pair_idx), np.int64, len(pair_idx))
    i_idx = np.fromiter((i for _, i in pair_idx), np.int64, len(pair_idx))
    by_cond = np.zeros((len(reviewers), len(conds)), dtype=np.int64)
    for k in range(len(conds)):
        by_cond[:, k] = np.bincount(r_idx[member[i_idx, k] == 1], minlength=len(reviewers))
    loads = np.bincount(r_idx, minlength=len(reviewers)).tolist()
    reviews = np.bincount(i_idx, minlength=len(ideas)).tolist()
    rows = by_cond.tolist()
    spread = 0
    for r in np.unique(r_idx).tolist():
        values = [rows[r][column[c]] for c in prep.cond_avail[r]]
        if len(values) >= 2:
            spread = max(spread, max(values) - min(values))
    return {
        "reviewer_loads": {rev.id: loads[r] for r, rev in enumerate(reviewers)},
        "reviewer_condition_counts": {
            rev.id: dict(zip(conds, rows[r], strict=True)) for r, rev in enumerate(reviewers)
        },
        "idea_review_counts": {idea.id: reviews[i] for i, idea in enumerate(ideas)},
        "max_condition_spread": spread,
    }


def check_rules(result: AssignmentResult, inputs: AssignmentInputs) -> list[str]:
    """Every hard rule, verified from the pairs alone; returns the violations found."""
    params = inputs.params
    errors: list[str] = []
    if not result.feasible:
        return [] if result.problems else ["infeasible result without an explanation"]
    ideas = {idea.id: idea for idea in inputs.ideas}
    reviewers = {rev.id: rev for rev in inputs.reviewers}
    pairs = list(result.pairs)
    if len(set(pairs)) != len(pairs):
        errors.append("a (reviewer, idea) pair appears more than once")
    for rid, iid in pairs:
        if rid not in reviewers or iid not in ideas:
            errors.append(f"pair ({rid}, {iid}) names an unknown reviewer or idea")
    pairs = [(r, i) for r, i in set(pairs) if r in reviewers and i in ideas]
    fixed = set(inputs.fixed)
    for pair in fixed:
        if pair not in set(result.pairs):
            errors.append(f"submitted review {pair} was dropped")
    keys = {rev.id: institution_keys([rev.institution], [rev.email]) for rev in inputs.reviewers}
    idea_keys = {idea.id: institution_keys(idea.institutions) for idea in inputs.ideas}
    by_reviewer: dict[str, list[str]] = defaultdict(list)
    per_idea: Counter[str] = Counter()
    for rid, iid in pairs:
        by_reviewer[rid].append(iid)
        per_idea[iid] += 1
        if (rid, iid) in fixed:
            continue
        if ideas[iid].topic not in reviewers[rid].topics:
            errors.append(f"reviewer {rid} got idea {iid} outside their topics")
        if keys[rid] & idea_keys[iid]:
            errors.append(f"reviewer {rid} got idea {iid} from their own institution")
    for iid in ideas:
        n = per_idea[iid]
        if not params.min_reviews <= n <= params.max_reviews:
            errors.append(
                f"idea {iid} has {n} reviews, outside {params.min_reviews}–{params.max_reviews}"
            )
        if result.idea_review_counts.get(iid, 0) != n:
            errors.append(f"reported review count of idea {iid} is wrong")
    for rid, rev in reviewers.items():
        got = by_reviewer.get(rid, [])
        if not rev.load_min <= len(got) <= rev.max_load:
            errors.append(
                f"reviewer {rid} has {len(got)} ideas, outside their load "
                f"{rev.load_min}–{rev.max_load}"
            )
        if result.reviewer_loads.get(rid, 0) != len(got):
            errors.append(f"reported load of reviewer {rid} is wrong")
        if not got:
            continue
        counts = Counter(c for iid in got for c in set(ideas[iid].conditions))
        reported = {c: k for c, k in result.reviewer_condition_counts.get(rid, {}).items() if k}
        if reported != dict(counts):
            errors.append(f"reported condition counts of reviewer {rid} are wrong")
        if len(counts) < params.min_conditions:
            errors.append(f"reviewer {rid} sees {_n(len(counts), 'condition')}")
        if params.require_human_and_ai:
            kinds = {inputs.conditions[c] for c in counts}
            for kind in KINDS:
                if kind not in kinds:
                    errors.append(f"reviewer {rid} sees no {kind} idea")
        # Balance over the conditions the reviewer could have been given.
        fixed_ideas = {i for r, i in fixed if r == rid}
        avail = {
            c
            for idea in inputs.ideas
            if (idea.topic in rev.topics and not keys[rid] & idea_keys[idea.id])
            or idea.id in fixed_ideas
            for c in idea.conditions
        }
        values = [counts.get(c, 0) for c in avail]
        spread = max(values) - min(values) if len(values) >= 2 else 0
        allowed = params.max_condition_spread + result.balance_excess.get(rid, 0)
        if spread > allowed:
            errors.append(
                f"reviewer {rid}'s condition counts differ by {spread} (allowed {allowed})"
            )
    if params.balance == "strict" and result.balance_excess:
        errors.append("balance relaxed although balance='strict'")
    return errors


# --------------------------------------------------------------------------- synthetic data

# Si et al. Table 4: ideas per topic per condition, and Table 16's institution skew.
SI_TOPICS = {
    "Factuality": 11,
    "Multilingual": 10,
    "Coding": 9,
    "Uncertainty": 6,
    "Safety": 5,
    "Bias": 4,
    "Math": 4,
}
SI_CONDITIONS = {"Human": HUMAN, "AI": AI, "AI_Rerank": AI}


def synthetic_inputs(
    scale: float = 1.0,
    *,
    seed: int = 0,
    overlap: int = 17,
    n_reviewers: int = 79,
    n_institutions: int = 32,
    params: Parameters | None = None,
) -> AssignmentInputs:
    """A study shaped like Si et al.'s: 49 ideas per condition over 7 topics (17 shared by
    AI and AI_Rerank), 79 reviewers with loads 2–7 and two ranked topics, Stanford-heavy
    institutions; `scale` multiplies ideas, reviewers and institutions."""
    rng = np.random.default_rng(seed)
    topics = list(SI_TOPICS)
    insts = ["Stanford University"] + [
        f"Institute {k}" for k in range(1, max(2, round(n_institutions * scale)))
    ]
    weights_inst = np.full(len(insts), 0.68 / (len(insts) - 1))
    weights_inst[0] = 0.32
    ideas: list[IdeaInput] = []
    per_topic_ideas: Counter[str] = Counter()
    k = 0
    for topic, n in SI_TOPICS.items():
        n_scaled = max(1, round(n * scale))
        shared = round(n_scaled * overlap / 49)
        for cond in ("Human", "AI", "AI_Rerank"):
            count = n_scaled - (shared if cond == "AI_Rerank" else 0)
            for _ in range(count):
                k += 1
                conds: tuple[str, ...] = (cond,)
                inst: tuple[str, ...] = ()
                if cond == "Human":
                    inst = (insts[rng.choice(len(insts), p=weights_inst)],)
                ideas.append(IdeaInput(f"I{k}", topic, conds, inst))
                per_topic_ideas[topic] += 1
        # Shared ideas belong to both AI conditions.
        ai_in_topic = [j for j, idea in enumerate(ideas) if idea.topic == topic]
        ai_in_topic = [j for j in ai_in_topic if ideas[j].conditions == ("AI",)][:shared]
        for j in ai_in_topic:
            ideas[j] = IdeaInput(ideas[j].id, topic, ("AI", "AI_Rerank"), ())
    topic_w = np.array([per_topic_ideas[t] for t in topics], dtype=float)
    topic_w /= topic_w.sum()
    loads = np.array([2, 3, 4, 5, 6, 7])
    load_p = np.array([0.12, 0.30, 0.30, 0.13, 0.08, 0.07])
    reviewers = []
    for j in range(max(2, round(n_reviewers * scale))):
        first = rng.choice(len(topics), p=topic_w)
        chosen = [topics[first]]
        if rng.random() < 0.9:
            w = topic_w.copy()
            w[first] = 0
            chosen.append(topics[rng.choice(len(topics), p=w / w.sum())])
        load = int(rng.choice(loads, p=load_p))
        inst_name = insts[rng.choice(len(insts), p=weights_inst)]
        reviewers.append(ReviewerInput(f"R{j + 1}", tuple(chosen), load, institution=inst_name))
    return AssignmentInputs(
        ideas=tuple(ideas),
        conditions=dict(SI_CONDITIONS),
        reviewers=tuple(reviewers),
        params=params or Parameters(seed=seed),
    )
