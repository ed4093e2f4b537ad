"""Who is owed what, without a database: per accepted review, per idea, and the top-k
bonus with its seeded tie-break, on the Si et al. rates."""

from __future__ import annotations

from decimal import Decimal

import pytest

from studies.protocol.payments import (
    SI_RATES,
    IdeaAuthor,
    Rates,
    ReviewRecord,
    payment_run,
    rank_ideas,
    reviewer_payments,
)


def test_si_rates_are_the_published_ones():
    assert (SI_RATES.per_review, SI_RATES.per_idea, SI_RATES.bonus, SI_RATES.top_k) == (
        Decimal(25),
        Decimal(300),
        Decimal(1000),
        5,
    )


def test_reviewers_are_paid_per_accepted_review_only():
    reviews = [
        ReviewRecord("R1", "a", 6, "accepted"),
        ReviewRecord("R1", "b", 5, "accepted"),
        ReviewRecord("R1", "c", 4, "rejected"),
        ReviewRecord("R2", "a", 7, "pending"),
        ReviewRecord("R2", "b", 3, "accepted"),
    ]
    r1, r2 = reviewer_payments(reviews, SI_RATES)
    assert (r1.reviewer, r1.submitted, r1.accepted, r1.rejected, r1.pending) == ("R1", 3, 2, 1, 0)
    assert r1.amount == Decimal(50)
    assert (r2.submitted, r2.accepted, r2.pending, r2.amount) == (2, 1, 1, Decimal(25))


def test_the_si_study_pays_what_the_paper_reports():
    # 49 human ideas by 49 authors, 298 accepted reviews: $7,450 to reviewers, $14,700 in
    # fees and $5,000 in bonuses (the paper's "$300 per idea" and "$1,000 to the top 5").
    ideas = [IdeaAuthor(f"H{k}", f"author{k}@example.org") for k in range(49)]
    ideas += [IdeaAuthor(f"A{k}") for k in range(49)]
    reviews = [
        ReviewRecord(f"R{k % 79}", ideas[k % 98].idea, float(1 + k % 10), "accepted")
        for k in range(298)
    ]
    run = payment_run(reviews=reviews, ideas=ideas, rates=SI_RATES, seed=1)
    assert run.reviewer_total == Decimal(7450)
    assert sum(a.fee for a in run.authors) == Decimal(14700)
    human_top = [r for r in run.top if r.idea.startswith("H")]
    assert sum(a.bonus for a in run.authors) == Decimal(1000) * len(human_top)
    assert run.ideas_without_author == 49


def test_top_k_ranks_by_mean_overall_without_rejected_reviews():
    reviews = [
        ReviewRecord("R1", "a", 8, "accepted"),
        ReviewRecord("R2", "a", 2, "rejected"),  # not counted: a is 8, not 5
        ReviewRecord("R1", "b", 7, "accepted"),
        ReviewRecord("R2", "b", 6, "pending"),  # counted: b is 6.5
        ReviewRecord("R1", "c", 6, "accepted"),
        ReviewRecord("R1", "d", None, "accepted"),  # no score, not ranked
    ]
    ranking = rank_ideas(reviews, seed=0)
    assert [(r.idea, r.mean_overall, r.rank) for r in ranking] == [
        ("a", 8.0, 1),
        ("b", 6.5, 2),
        ("c", 6.0, 3),
    ]
    assert not any(r.tied for r in ranking)


def test_ties_are_broken_by_the_seed_the_same_way_every_time():
    reviews = [ReviewRecord("R1", name, 7, "accepted") for name in "abcdef"]
    reviews.append(ReviewRecord("R1", "z", 9, "accepted"))
    ideas = [IdeaAuthor(name, f"{name}@example.org") for name in "abcdefz"]
    rates = Rates(bonus=Decimal(1000), top_k=3)
    draws = {
        seed: tuple(
            r.idea for r in payment_run(reviews=reviews, ideas=ideas, rates=rates, seed=seed).top
        )
        for seed in range(12)
    }
    for seed, top in draws.items():
        again = payment_run(reviews=reviews, ideas=ideas, rates=rates, seed=seed)
        assert tuple(r.idea for r in again.top) == top  # same seed, same top 3
        assert top[0] == "z"  # the clear winner is never left to chance
        assert "tie across the top-3 line" in again.notes[0]
    assert len({top[1:] for top in draws.values()}) > 1  # other seeds draw others
    run = payment_run(reviews=reviews, ideas=ideas, rates=rates, seed=4)
    paid = {a.author: a.bonus for a in run.authors if a.bonus}
    assert sorted(paid) == sorted(f"{r.idea}@example.org" for r in run.top)


def test_an_author_of_several_ideas_gets_a_fee_for_each():
    ideas = [IdeaAuthor("a", "ada@x.org"), IdeaAuthor("b", "ada@x.org"), IdeaAuthor("c")]
    reviews = [ReviewRecord("R1", "b", 9, "accepted"), ReviewRecord("R1", "a", 3, "accepted")]
    run = payment_run(
        reviews=reviews,
        ideas=ideas,
        rates=Rates(Decimal(25), Decimal(300), Decimal(1000), 1),
        seed=0,
    )
    (ada,) = run.authors
    assert ada.ideas == ("a", "b") and ada.top_ideas == ("b",)
    assert ada.fee == Decimal(600) and ada.bonus == Decimal(1000) and ada.amount == Decimal(1600)
    assert run.total == Decimal(50) + Decimal(1600)


def test_negative_amounts_and_unknown_decisions_are_refused():
    with pytest.raises(ValueError):
        Rates(per_review=Decimal(-1))
    with pytest.raises(ValueError):
        ReviewRecord("R1", "a", 5, "maybe")
