"""LigBench's agreement with reviewers' pair ratings: derived preferences, the run page and
the report's agreement inputs."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from django.urls import reverse

from judging.corpus import reference_corpus_import
from judging.methods.alignment import alignment_table, preferences_from_scores
from judging.models import IdeaRating
from judging.services import judge_run_create, judge_run_execute
from studies.judge_ratings import judge_ratings_provider
from studies.models import PairJudgment, PairTask, Reviewer
from studies.selectors import idea_labels

CORPUS = Path(__file__).parent / "data" / "references.json"


def _human(rows):
    return pd.DataFrame(
        rows, columns=["reviewer_id", "idea_a", "idea_b", "shown_first", "dimension", "choice"]
    )


def test_the_score_order_is_the_preference_and_agreement_is_counted_per_rating():
    scores = pd.DataFrame(
        [("p", "overall", 3.0), ("q", "overall", 2.0), ("r", "overall", 2.0)],
        columns=["idea_id", "metric", "score"],
    )
    human = _human(
        [
            ("R1", "p", "q", "p", "overall", "first"),  # p better: agrees
            ("R2", "p", "q", "q", "overall", "first"),  # q better: disagrees
            ("R1", "q", "r", "r", "overall", "tie"),  # equal scores, a tie: agrees
            ("R2", "r", "p", "r", "overall", "second"),  # p better: agrees
            ("R1", "p", "s", "p", "overall", "first"),  # s has no score: unmatched
        ]
    )
    derived = preferences_from_scores(scores, human)
    assert set(derived["verdict"]) == {"A", "B", "tie"} and len(derived) == 3
    (row,) = alignment_table(scores, human)
    assert row["dimension"] == "overall" and row["n_ratings"] == 4 and row["unmatched"] == 1
    assert row["with_ties"]["accuracy"] == pytest.approx(3 / 4)
    # Without ties: the tie rating is dropped, 2 of the 3 left agree.
    assert row["without_ties"]["n"] == 3
    assert row["without_ties"]["accuracy"] == pytest.approx(2 / 3)


def _rate_pairs(study, ideas, prefer):
    reviewer = Reviewer.objects.create(study=study, pseudonym="R001", email="r@example.org")
    for a, b in zip(ideas, ideas[1:], strict=False):
        task = PairTask.objects.create(
            study=study,
            reviewer=reviewer,
            idea_a=a,
            idea_b=b,
            a_on_left=True,
            dimensions=["overall"],
            status=PairTask.Status.SUBMITTED,
        )
        winner = "a" if prefer(a) > prefer(b) else "b"
        PairJudgment.objects.create(
            task=task, dimension="overall", choice="first" if winner == "a" else "second"
        )


@pytest.mark.slow
def test_a_ligbench_run_shows_its_agreement_with_reviewers_on_its_page_and_in_the_report(
    client, study, judge, scripted, db
):
    reference_corpus_import(data=CORPUS.read_bytes(), name="example", filename="refs.json")
    run = judge_run_execute(
        run=judge_run_create(study=study, method="ligbench", config=judge, params={"references": 6})
    )
    ideas = list(study.ideas.order_by("pk"))
    overall = dict(
        IdeaRating.objects.filter(run=run, dimension="elo_rating").values_list("idea", "score")
    )
    _rate_pairs(study, ideas, prefer=lambda i: overall[i.pk])  # reviewers agree with it

    client.force_login(study.owner)
    page = client.get(reverse("judging:run_detail", args=[study.slug, run.pk]))
    assert page.status_code == 200
    report = page.context["report"]["alignment"]
    (row,) = report["rows"]
    assert row["dimension"] == "overall" and row["n_ratings"] == len(ideas) - 1
    assert row["with_ties"]["accuracy"] == 1.0
    assert "Agreement with reviewers" in page.content.decode()

    (data,) = judge_ratings_provider().judge_inputs(
        study, ["overall", "novelty"], panel_bootstrap=100
    )
    labels = idea_labels(study)
    assert set(data.judge_scores["metric"]) == {"overall", "novelty"}
    assert len(data.judge_pairs) == len(ideas) - 1
    first = data.judge_pairs.iloc[0]
    a, b = labels[ideas[0].pk], labels[ideas[1].pk]
    assert (first["idea_a"], first["idea_b"]) == (a, b)
    assert first["verdict"] == ("A" if overall[ideas[0].pk] > overall[ideas[1].pk] else "B")
