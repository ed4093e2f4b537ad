"""Who is owed what at the end of a study: pure functions, no Django.

Reviewers are paid per accepted review. Idea authors (those ideas that carry an author
contact) are paid a fee per idea, and the authors of the top-k ideas by mean overall score
a bonus each. Si et al. paid $25 per review, $300 per idea and a $1,000 bonus to each of
the top 5 ideas; those are the documented example (`SI_RATES`), not a default.

Ranking: an idea's score is the mean overall score of its reviews that were not rejected
(a rejected review is not counted for pay, so it does not count for the bonus either).
Ideas without such a review are not ranked. Ties are broken by a seeded random order of
the ideas, so the same seed always gives the same top k and another seed may not: the
seed is shown with the result so that anyone can re-draw it.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal

from ..analysis.rounding import counted

ACCEPTED = "accepted"
REJECTED = "rejected"
PENDING = "pending"
DECISIONS = (ACCEPTED, REJECTED, PENDING)


@dataclass(frozen=True)
class Rates:
    per_review: Decimal = Decimal(0)
    per_idea: Decimal = Decimal(0)
    bonus: Decimal = Decimal(0)
    top_k: int = 0
    currency: str = "USD"

    def __post_init__(self) -> None:
        if min(self.per_review, self.per_idea, self.bonus) < 0 or self.top_k < 0:
            raise ValueError("payment amounts and top k cannot be negative")


SI_RATES = Rates(
    per_review=Decimal(25), per_idea=Decimal(300), bonus=Decimal(1000), top_k=5, currency="USD"
)


@dataclass(frozen=True)
class ReviewRecord:
    """One submitted review: who wrote it, on which idea, its overall score, the owner's
    decision (accepted, rejected or still pending)."""

    reviewer: str
    idea: str
    overall: float | None
    decision: str = PENDING

    def __post_init__(self) -> None:
        if self.decision not in DECISIONS:
            raise ValueError(f"decision must be one of {', '.join(DECISIONS)}")


@dataclass(frozen=True)
class IdeaAuthor:
    idea: str
    author: str = ""  # the author contact; "" when the idea has none (AI ideas)


@dataclass(frozen=True)
class ReviewerPayment:
    reviewer: str
    submitted: int
    accepted: int
    rejected: int
    pending: int
    amount: Decimal


@dataclass(frozen=True)
class RankedIdea:
    idea: str
    mean_overall: float
    reviews: int
    rank: int
    # True when the idea shares its mean with others across the top-k line or inside it,
    # so the seeded order decided its place.
    tied: bool


@dataclass(frozen=True)
class AuthorPayment:
    author: str
    ideas: tuple[str, ...]
    top_ideas: tuple[str, ...]
    fee: Decimal
    bonus: Decimal

    @property
    def amount(self) -> Decimal:
        return self.fee + self.bonus


@dataclass(frozen=True)
class PaymentRun:
    rates: Rates
    seed: int
    reviewers: tuple[ReviewerPayment, ...]
    ranking: tuple[RankedIdea, ...]
    authors: tuple[AuthorPayment, ...]
    ideas_without_author: int
    notes: tuple[str, ...] = field(default=())

    @property
    def top(self) -> tuple[RankedIdea, ...]:
        return self.ranking[: self.rates.top_k]

    @property
    def reviewer_total(self) -> Decimal:
        return sum((r.amount for r in self.reviewers), Decimal(0))

    @property
    def author_total(self) -> Decimal:
        return sum((a.amount for a in self.authors), Decimal(0))

    @property
    def total(self) -> Decimal:
        return self.reviewer_total + self.author_total


def reviewer_payments(reviews: Iterable[ReviewRecord], rates: Rates) -> list[ReviewerPayment]:
    """Per reviewer (sorted by name): reviews submitted, accepted, rejected, pending, and
    the amount owed for the accepted ones."""
    counts: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(DECISIONS, 0))
    for r in reviews:
        counts[r.reviewer][r.decision] += 1
    return [
        ReviewerPayment(
            reviewer=name,
            submitted=sum(c.values()),
            accepted=c[ACCEPTED],
            rejected=c[REJECTED],
            pending=c[PENDING],
            amount=rates.per_review * c[ACCEPTED],
        )
        for name, c in sorted(counts.items())
    ]


def rank_ideas(reviews: Iterable[ReviewRecord], seed: int) -> list[RankedIdea]:
    """Ideas by mean overall score of their reviews that were not rejected, best first;
    equal means in a seeded random order."""
    scores: dict[str, list[float]] = defaultdict(list)
    for r in reviews:
        if r.decision != REJECTED and r.overall is not None:
            scores[r.idea].append(float(r.overall))
    names = sorted(scores)
    order = list(range(len(names)))
    random.Random(seed).shuffle(order)
    draw = dict(zip(names, order, strict=True))
    means = {name: sum(v) / len(v) for name, v in scores.items()}
    ranked = sorted(names, key=lambda n: (-means[n], draw[n]))
    counts: dict[float, int] = defaultdict(int)
    for n in ranked:
        counts[means[n]] += 1
    return [
        RankedIdea(
            idea=n,
            mean_overall=means[n],
            reviews=len(scores[n]),
            rank=k,
            tied=counts[means[n]] > 1,
        )
        for k, n in enumerate(ranked, start=1)
    ]


def author_payments(
    ideas: Sequence[IdeaAuthor], ranking: Sequence[RankedIdea], rates: Rates
) -> list[AuthorPayment]:
    """Per author contact (sorted): the fee for each of their ideas and the bonus for each
    of their ideas in the top k. Ideas without a contact pay no one."""
    top = {r.idea for r in ranking[: rates.top_k]}
    by_author: dict[str, list[str]] = defaultdict(list)
    for idea in ideas:
        if idea.author.strip():
            by_author[idea.author.strip()].append(idea.idea)
    out = []
    for author, names in sorted(by_author.items()):
        names = sorted(names)
        winners = tuple(n for n in names if n in top)
        out.append(
            AuthorPayment(
                author=author,
                ideas=tuple(names),
                top_ideas=winners,
                fee=rates.per_idea * len(names),
                bonus=rates.bonus * len(winners),
            )
        )
    return out


def payment_run(
    *, reviews: Sequence[ReviewRecord], ideas: Sequence[IdeaAuthor], rates: Rates, seed: int
) -> PaymentRun:
    ranking = rank_ideas(reviews, seed)
    notes = []
    top = ranking[: rates.top_k]
    if rates.top_k and len(ranking) > rates.top_k:
        line = ranking[rates.top_k - 1].mean_overall
        if ranking[rates.top_k].mean_overall == line:
            notes.append(
                f"ideas with mean overall {line:g} tie across the top-{rates.top_k} line: "
                f"the seeded order ({seed}) decided which are in"
            )
    pending = sum(1 for r in reviews if r.decision == PENDING)
    if pending:
        notes.append(
            f"{counted(pending, 'review')} still {'waits' if pending == 1 else 'wait'} "
            "for a decision "
            f"and {'is' if pending == 1 else 'are'} not paid yet"
        )
    if rates.top_k and len(top) < rates.top_k:
        notes.append(
            f"only {counted(len(top), 'idea')} {'has' if len(top) == 1 else 'have'} a score, "
            f"fewer than the top {rates.top_k}"
        )
    return PaymentRun(
        rates=rates,
        seed=seed,
        reviewers=tuple(reviewer_payments(reviews, rates)),
        ranking=tuple(ranking),
        authors=tuple(author_payments(ideas, ranking, rates)),
        ideas_without_author=sum(1 for i in ideas if not i.author.strip()),
        notes=tuple(notes),
    )
