"""LigBench against the reference corpus, and judge validation, over HTTP (scripted server)."""

from __future__ import annotations

from pathlib import Path

import pytest

from judging.corpus import reference_corpus_import
from judging.methods.elo import expected_score, k_factor, soft_clamp
from judging.methods.novelty import novelty_score
from judging.models import (
    Formalisation,
    IdeaRating,
    JudgeRun,
    Judgment,
    LLMCall,
    ReferenceComparison,
)
from judging.services import JudgeRunRefused, judge_run_create, judge_run_execute
from tests.judging.embedding_cache import remembered_embeddings  # noqa: F401

CORPUS = Path(__file__).parent / "data" / "references.json"
Status = JudgeRun.Status


@pytest.fixture
def corpus(db):
    return reference_corpus_import(data=CORPUS.read_bytes(), name="example", filename="refs.json")


def test_ligbench_uses_the_corpus_with_debiased_scores_calibration_and_novelty(
    study, judge, scripted, corpus
):
    r = judge_run_create(study=study, method="ligbench", config=judge, params={"references": 4})
    assert r.params["corpus"] == corpus.pk  # "auto" resolved and stored for resumes
    r = judge_run_execute(run=r)
    assert r.status == Status.DONE, r.message
    # 6 formalisations + 6 novelty estimates + 6 × 4 comparisons, all over HTTP.
    assert r.total_calls == r.done_calls == scripted.requests == 6 + 6 + 24
    assert Formalisation.objects.filter(run=r, parts__isnull=False).count() == 6
    assert r.summary["corpus"] == corpus.pk and "venue-debiased" in r.summary["references"]
    assert ReferenceComparison.objects.filter(run=r).count() == 24 * 3
    papers = {p.pk: p for p in corpus.papers.all()}
    for rating in IdeaRating.objects.filter(run=r, dimension="elo_rating"):
        steps, last = rating.history[:-1], rating.history[-1]
        assert last["stopped"] in {"converged", "exhausted", "max_steps"}
        examples = last["calibration_examples"]
        assert len(examples) == 3
        assert last["initial"] == pytest.approx(
            sum(papers[e].rating_debiased for e in examples) / 3
        )
        # Every step is against a corpus paper's venue-debiased score, not its raw one,
        # and follows the update rule from the initial score.
        s = last["initial"]
        for step in steps:
            ref = papers[step["reference"]]
            assert step["reference_score"] == pytest.approx(ref.rating_debiased)
            e = expected_score(s, ref.rating_debiased)
            s = soft_clamp(s + k_factor(step["t"]) * (step["outcome"] - e))
            assert step["score"] == pytest.approx(s)
        assert rating.score == pytest.approx(s)
    for rating in IdeaRating.objects.filter(run=r, dimension="ligbench_novelty"):
        h = rating.history[0]
        s_llm = Judgment.objects.get(run=r, idea=rating.idea, metric="novelty_llm").score
        sims = [x["cosine"] for x in h["similarities"]]
        assert len(sims) == 4 and h["s_llm"] == s_llm
        assert rating.score == pytest.approx(novelty_score(sims, s_llm).novelty)


def test_a_rerun_of_ligbench_with_the_corpus_makes_no_new_calls(study, judge, scripted, corpus):
    first = judge_run_execute(
        run=judge_run_create(study=study, method="ligbench", config=judge, params={"references": 2})
    )
    scripted.reset_counts()
    again = judge_run_execute(
        run=judge_run_create(study=study, method="ligbench", config=judge, params={"references": 2})
    )
    assert again.status == Status.DONE and scripted.requests == 0
    assert again.cache_hits == first.total_calls == 6 * (1 + 1 + 2)
    a = dict(IdeaRating.objects.filter(run=first).values_list("idea_id", "score"))
    b = dict(IdeaRating.objects.filter(run=again).values_list("idea_id", "score"))
    assert a == b


def test_unparseable_novelty_estimates_leave_novelty_empty_not_guessed(
    study, judge, scripted, corpus
):
    scripted.rules.garbage_when = "Novelty means departing"
    r = judge_run_execute(
        run=judge_run_create(study=study, method="ligbench", config=judge, params={"references": 2})
    )
    assert r.status == Status.DONE and r.unparseable == 6
    novelty = IdeaRating.objects.filter(run=r, dimension="ligbench_novelty")
    assert novelty.count() == 6 and all(n.score is None for n in novelty)
    assert all(n.history[0]["s_sim"] is not None for n in novelty)
    assert not IdeaRating.objects.filter(run=r, dimension="elo_rating", score=None).exists()


def test_the_fallback_without_a_corpus_is_labelled(study, judge, scripted, corpus):
    r = judge_run_execute(
        run=judge_run_create(
            study=study, method="ligbench", config=judge, params={"references": 2, "corpus": None}
        )
    )
    assert r.status == Status.DONE and r.summary["corpus"] is None
    assert r.summary["references"].startswith("study ideas (fallback")
    assert not ReferenceComparison.objects.filter(run=r).exists()


def test_a_corpus_of_another_researcher_cannot_be_used(study, judge, corpus, other_researcher):
    corpus.created_by = other_researcher
    corpus.save()
    with pytest.raises(JudgeRunRefused, match="no reference corpus"):
        judge_run_create(study=study, method="ligbench", config=judge, params={"corpus": corpus.pk})
    with pytest.raises(JudgeRunRefused, match="needs a reference corpus"):
        judge_run_create(study=study, method="validation", config=judge)


def test_validation_reports_accuracy_per_dimension_against_debiased_scores(
    study, judge, scripted, corpus
):
    # The example corpus is built so that longer formal parts mean better papers and the
    # venues differ only in leniency: the scripted judge (longer wins) matches the
    # debiased order, while the raw scores mislead across venues.
    r = judge_run_create(study=study, method="validation", config=judge, params={"pairs": 20})
    assert r.total_calls == 20
    r = judge_run_execute(run=r)
    assert r.status == Status.DONE, r.message
    assert r.done_calls == scripted.requests == r.summary["pairs"] == 20
    table = r.summary["validation"]
    assert set(table) == {"rating", "contribution", "soundness"}
    for dim, row in table.items():
        assert row["trials"] == 20 and row["unparseable"] == 0
        assert row["scored"] + row["truth_ties"] == 20
        assert row["ci_low"] <= row["accuracy"] <= row["ci_high"]
        assert row["accuracy"] >= 0.8, (dim, row)
        assert row["accuracy"] >= r.summary["raw_accuracy"][dim]
    assert LLMCall.objects.filter(run=r).count() == 20


def test_validation_in_both_orders_reports_position_consistency(study, judge, scripted, corpus):
    scripted.rules.position_bias = 1.0  # always "A"
    r = judge_run_execute(
        run=judge_run_create(
            study=study,
            method="validation",
            config=judge,
            params={"pairs": 6, "both_orders": True},
        )
    )
    assert r.status == Status.DONE and r.done_calls == 12
    assert r.summary["position_consistency"] == 0.0
    assert r.summary["validation"]["rating"]["accuracy"] == pytest.approx(0.5, abs=0.2)
