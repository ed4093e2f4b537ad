"""LigBench against the reference corpus, and judge validation, over HTTP (scripted server)."""

from __future__ import annotations

from pathlib import Path

import pytest

from judging.corpus import reference_corpus_import
from judging.methods.elo import expected_score, k_factor, soft_clamp
from judging.methods.ligbench_posterior import LAPSE, PRIOR_SD, SLOPE
from judging.methods.novelty import novelty_score
from judging.methods.prompts import LIGBENCH_DIMENSIONS
from judging.models import Formalisation, IdeaRating, JudgeRun, Judgment, ReferenceComparison
from judging.services import JudgeRunRefused, judge_run_create, judge_run_execute
from llm.models import LLMCall
from tests.judging.posterior_reference import density, mutual_information, posterior_mean

CORPUS = Path(__file__).parent / "data" / "references.json"
Status = JudgeRun.Status
# LigBench runs over a corpus: computation on rows SQLite and PostgreSQL return alike, so
# CI runs the database tests here once, on PostgreSQL (docs/testing.md, `once`).


@pytest.fixture
def corpus(db):
    return reference_corpus_import(data=CORPUS.read_bytes(), name="example", filename="refs.json")


@pytest.mark.slow
def test_ligbench_uses_the_corpus_with_debiased_scores_calibration_and_novelty(
    study, judge, scripted, corpus
):
    r = judge_run_create(study=study, method="ligbench", config=judge, params={"references": 4})
    assert r.params["corpus"] == corpus.pk  # "auto" resolved and stored for resumes
    r = judge_run_execute(run=r)
    assert r.status == Status.DONE, r.message
    # 6 formalisations + 6 initial scorings (with the novelty estimate) + the comparisons
    # the chains asked for (at most 4 each), all over HTTP.
    met = (
        ReferenceComparison.objects.filter(run=r).values("idea", "reference").order_by().distinct()
    )
    assert 6 <= met.count() <= 24
    assert r.total_calls == r.done_calls == scripted.requests == 6 + 6 + met.count()
    assert Formalisation.objects.filter(run=r, parts__isnull=False).count() == 6
    assert r.summary["corpus"] == corpus.pk and "venue-debiased" in r.summary["references"]
    assert ReferenceComparison.objects.filter(run=r).count() == met.count() * 3
    papers = {p.pk: p for p in corpus.papers.all()}
    for rating in IdeaRating.objects.filter(run=r, dimension="elo_rating"):
        steps, last = rating.history[:-1], rating.history[-1]
        assert last["stopped"] in {"converged", "exhausted", "max_steps"}
        # The initial-scoring call shows `calibration` (10) related references spread
        # over their scores, lowest first: here all 4 related ones, sorted by score.
        examples = last["calibration_examples"]
        related = {s["reference"] for s in steps} | set(examples)
        assert len(examples) == len(related) == 4
        means = [
            sum(papers[pk].debiased(d) for d in LIGBENCH_DIMENSIONS) / len(LIGBENCH_DIMENSIONS)
            for pk in examples
        ]
        assert means == sorted(means)
        # The judge's own initial score, given after reading the scored examples.
        asked = Judgment.objects.get(run=r, idea=rating.idea, metric="ligbench_initial_rating")
        assert last["initial_source"] == "judge" and last["initial"] == asked.score
        # Every step is against a corpus paper's venue-debiased score, not its raw one,
        # and follows the update rule from the initial score.
        s = last["initial"]
        for step in steps:
            ref = papers[step["reference"]]
            assert step["reference_score"] == pytest.approx(ref.rating_debiased)
            e = expected_score(s, ref.rating_debiased)
            s = soft_clamp(s + k_factor(step["t"]) * (step["outcome"] - e))
            assert step["score"] == pytest.approx(s)
        # The chain decides the steps; the reported score is (by default) the posterior
        # mean given the initial score and the same verdicts.
        assert last["estimate"] == "posterior" and last["chain_score"] == pytest.approx(s)
        verdicts = [(x["reference_score"], x["outcome"]) for x in steps]
        assert rating.score == pytest.approx(
            posterior_mean(last["initial"], verdicts, PRIOR_SD, SLOPE, LAPSE), abs=2e-3
        )
    for rating in IdeaRating.objects.filter(run=r, dimension="ligbench_novelty"):
        h = rating.history[0]
        s_llm = Judgment.objects.get(run=r, idea=rating.idea, metric="novelty_llm").score
        sims = [x["cosine"] for x in h["similarities"]]
        assert len(sims) == 4 and h["s_llm"] == s_llm  # the 4 references retrieved
        # k and μ calibrated for MiniLM on this corpus, the same for every idea of the run.
        calibration = r.summary["novelty_calibration"]
        assert (h["k"], h["mu"]) == (calibration["k"], calibration["mu"])
        assert h["calibration"].startswith("quantile matching")
        assert rating.score == pytest.approx(
            novelty_score(sims, s_llm, k=h["k"], mu=h["mu"]).novelty
        )


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


def test_unparseable_initial_scores_leave_novelty_empty_not_guessed(study, judge, scripted, corpus):
    scripted.rules.garbage_when = "SCORES:"  # only the initial-scoring prompt asks for it
    r = judge_run_execute(
        run=judge_run_create(study=study, method="ligbench", config=judge, params={"references": 2})
    )
    assert r.status == Status.DONE and r.unparseable == 6
    novelty = IdeaRating.objects.filter(run=r, dimension="ligbench_novelty")
    assert novelty.count() == 6 and all(n.score is None for n in novelty)
    assert all(n.history[0]["s_sim"] is not None for n in novelty)
    elo = IdeaRating.objects.filter(run=r, dimension="elo_rating")
    assert elo.count() == 6 and not elo.filter(score=None).exists()
    # Without the judge's initial scores the chains start from the examples' mean.
    assert all("examples' mean" in e.history[-1]["initial_source"] for e in elo)


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


def _comparisons_per_idea(run):
    met = set(ReferenceComparison.objects.filter(run=run).values_list("idea", "reference"))
    out: dict[int, int] = {}
    for idea, _ref in met:
        out[idea] = out.get(idea, 0) + 1
    return out


def test_ligbench_makes_no_call_after_every_chain_of_an_idea_has_stopped(
    study, judge, scripted, corpus
):
    # 18 related references each, but a loose ε: the chains stop long before they run out.
    params = {"references": 18, "epsilon": 0.05, "selection": "paper"}
    r = judge_run_execute(
        run=judge_run_create(study=study, method="ligbench", config=judge, params=params)
    )
    assert r.status == Status.DONE, r.message
    per_idea = _comparisons_per_idea(r)
    # Every HTTP request was a formalisation, an initial scoring or a comparison a chain
    # still needed: the idea's comparisons are exactly the steps of its longest chain.
    assert scripted.requests == r.total_calls == r.done_calls == 6 + 6 + sum(per_idea.values())
    stopped_early = 0
    for idea, n in per_idea.items():
        chains = IdeaRating.objects.filter(run=r, idea=idea, dimension__startswith="elo_")
        steps = [len(c.history) - 1 for c in chains]
        assert n == max(steps)
        assert all(c.history[-1]["stopped"] in {"converged", "max_steps"} for c in chains)
        stopped_early += n < 18
    assert stopped_early == 6  # no idea met every reference it could have


@pytest.mark.slow  # runs of seconds on the scripted server
def test_the_probe_rule_calls_only_for_the_steps_its_longest_chain_took(
    study, judge, scripted, corpus
):
    params = {"references": 18, "epsilon": 0.05}
    r = judge_run_execute(
        run=judge_run_create(study=study, method="ligbench", config=judge, params=params)
    )
    assert r.status == Status.DONE, r.message
    assert r.summary["selection"] == "probe"
    per_idea = _comparisons_per_idea(r)
    assert scripted.requests == r.total_calls == r.done_calls == 6 + 6 + sum(per_idea.values())
    for idea, n in per_idea.items():
        chains = IdeaRating.objects.filter(run=r, idea=idea, dimension__startswith="elo_")
        assert n == max(len(c.history) - 1 for c in chains)
        assert all(
            c.history[-1]["stopped"] in {"converged", "max_steps", "exhausted"} for c in chains
        )


def test_the_nearest_reference_option_meets_references_near_the_current_score(
    study, judge, scripted, corpus
):
    params = {"references": 18, "selection": "nearest"}
    r = judge_run_execute(
        run=judge_run_create(study=study, method="ligbench", config=judge, params=params)
    )
    assert r.status == Status.DONE, r.message
    assert r.summary["selection"] == "nearest" and r.summary["max_steps"] == 12
    per_idea = _comparisons_per_idea(r)
    assert all(n <= 12 for n in per_idea.values())
    assert scripted.requests == 6 + 6 + sum(per_idea.values())
    papers = {p.pk: p for p in corpus.papers.all()}
    dims = ("rating", "contribution", "soundness")
    for idea, n in per_idea.items():
        chains = {
            d: IdeaRating.objects.get(run=r, idea=idea, dimension=f"elo_{d}").history for d in dims
        }
        met: set[int] = set()
        for i in range(n):
            running = [d for d in dims if len(chains[d]) - 1 > i]
            before = {
                d: chains[d][i - 1]["score"] if i else chains[d][-1]["initial"] for d in running
            }

            def distance(p, before=before, running=running):
                return sum(abs(p.debiased(d) - before[d]) for d in running) / len(running)

            chosen = papers[chains[running[0]][i]["reference"]]
            unmet = [p for p in papers.values() if p.pk not in met and p.debiased("rating")]
            # No reference still unmet was nearer the chains' scores at that step.
            assert distance(chosen) <= min(distance(p) for p in unmet) + 1e-9
            met.add(chosen.pk)


@pytest.mark.slow  # runs of seconds on the scripted server
def test_the_information_option_asks_the_most_informative_reference_and_stops_on_sd(
    study, judge, scripted, corpus
):
    params = {"references": 18, "selection": "information", "sd_stop": 0.42}
    r = judge_run_execute(
        run=judge_run_create(study=study, method="ligbench", config=judge, params=params)
    )
    assert r.status == Status.DONE, r.message
    assert r.summary["selection"] == "information" and r.summary["max_steps"] == 10
    per_idea = _comparisons_per_idea(r)
    # No call after an idea's every posterior stopped: its calls are its longest one's steps.
    assert scripted.requests == r.total_calls == 6 + 6 + sum(per_idea.values())
    papers = {p.pk: p for p in corpus.papers.all()}
    dims = ("rating", "contribution", "soundness")
    stopped_early = 0
    for idea, n in per_idea.items():
        rows = {d: IdeaRating.objects.get(run=r, idea=idea, dimension=f"elo_{d}") for d in dims}
        hist = {d: rows[d].history for d in dims}
        assert n == max(len(h) - 1 for h in hist.values()) <= 12
        stopped_early += n < 12
        met: set[int] = set()
        for i in range(n):
            running = [d for d in dims if len(hist[d]) - 1 > i]
            verdicts = {
                d: [(x["reference_score"], x["outcome"]) for x in hist[d][:i]] for d in running
            }
            points = {
                d: density(hist[d][-1]["initial"], verdicts[d], PRIOR_SD, SLOPE, LAPSE, n=800)
                for d in running
            }

            def gain(p, points=points, running=running):
                return sum(
                    mutual_information(points[d], p.debiased(d), SLOPE, LAPSE) for d in running
                )

            chosen = papers[hist[running[0]][i]["reference"]]
            unmet = [
                p
                for p in papers.values()
                if p.pk not in met and all(p.debiased(d) is not None for d in dims)
            ]
            # No unmet reference promised more information at that step.
            assert gain(chosen) >= max(gain(p) for p in unmet) - 1e-3
            met.add(chosen.pk)
        for d in dims:
            end = hist[d][-1]
            assert end["stopped"] in {"converged", "max_steps"}
            assert (end["posterior_sd"] < 0.42) == (end["stopped"] == "converged")
            every = [(x["reference_score"], x["outcome"]) for x in hist[d][:-1]]
            assert rows[d].score == pytest.approx(
                posterior_mean(end["initial"], every, PRIOR_SD, SLOPE, LAPSE), abs=2e-3
            )
    assert stopped_early > 0


@pytest.mark.slow  # runs of seconds on the scripted server
def test_a_ligbench_run_resumed_after_a_crash_continues_each_chain_where_it_stopped(
    study, judge, scripted, corpus, monkeypatch
):
    import judging.services.engine as engine

    params = {"references": 10, "epsilon": 0.02}
    judge.concurrency = 1
    judge.save()
    whole = judge_run_execute(
        run=judge_run_create(study=study, method="ligbench", config=judge, params=params)
    )
    expected = dict(
        IdeaRating.objects.filter(run=whole, dimension="elo_rating").values_list("idea", "score")
    )
    LLMCall.objects.all().delete()
    scripted.reset_counts()
    r = judge_run_create(study=study, method="ligbench", config=judge, params=params)
    real_record, seen = engine.record, []

    def crashing_record(*args, **kwargs):
        call = real_record(*args, **kwargs)
        seen.append(call.pk)
        if len(seen) == 20:  # inside the comparisons: 12 calls precede them
            raise KeyboardInterrupt
        return call

    monkeypatch.setattr(engine, "record", crashing_record)
    with pytest.raises(KeyboardInterrupt):
        judge_run_execute(run=r)
    monkeypatch.setattr(engine, "record", real_record)
    from judging.services import judge_run_resume

    r = judge_run_execute(run=judge_run_resume(run=r, force=True))
    assert r.status == Status.DONE, r.message
    assert scripted.requests == whole.http_calls  # nothing asked twice
    got = dict(
        IdeaRating.objects.filter(run=r, dimension="elo_rating").values_list("idea", "score")
    )
    assert got == pytest.approx(expected)
