"""The style-leakage check: a cross-validated classifier tells clearly different styles
apart (AUC near 1) and cannot after the test server's style-equalising rewrite (AUC near
0.5); small samples are refused with a clear message; the job runs from the leakage page
with progress and shows AUCs with CIs and a plot to the owner only."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from django.test import Client
from django.urls import reverse

from judging.testserver import Rules, TestServer, answer_for
from llm.models import JudgeConfig, LLMCall
from studies import services
from studies.analysis.leakage import (
    STYLE_FEATURES,
    LeakageError,
    LeakageResult,
    auc_score,
    auc_with_ci,
    leakage_classifier,
    max_folds,
    parse_source_guess,
    reading,
    source_guess_messages,
    style_features,
    verdict,
)
from studies.analysis.leakage_plots import leakage_svg
from studies.models import AuditEvent, Condition, Idea, IdeaCondition, JobRun, Topic
from studies.protocol.normalization import normalization_messages
from studies.services.study import study_create
from studies.tasks import check_leakage, normalize_ideas

# --------------------------------------------------------------------------- synthetic ideas

SECTIONS = {
    "title": "Title",
    "problem_statement": "Problem Statement",
    "motivation": "Motivation",
    "proposed_method": "Proposed Method",
    "experiment_plan": "Experiment Plan",
    "test_cases": "Test Cases",
    "fallback_plan": "Fallback Plan",
}
SUBJECTS = [
    "the model",
    "the verifier",
    "the retriever",
    "the planner",
    "the baseline",
    "our prompt",
]
VERBS = ["checks", "rewrites", "ranks", "filters", "scores", "summarises", "explains"]
OBJECTS = ["each claim", "the retrieved passages", "every reasoning step", "the final answer"]
TAILS = [
    "with GPT-4",
    "on TruthfulQA",
    "using 12 samples",
    "before answering",
    "in 3 languages",
    "with Llama-3-8B",
    "on HotpotQA",
    "after each turn",
]


def clauses(rng: random.Random) -> dict[str, list[str]]:
    """One idea's content: the same clause vocabulary whoever writes it up."""

    def clause() -> str:
        return " ".join(rng.choice(pool) for pool in (SUBJECTS, VERBS, OBJECTS, TAILS))

    return {
        k: [clause() for _ in range(1 if k == "title" else rng.randint(2, 4))] for k in SECTIONS
    }


def human_style(c: dict[str, list[str]]) -> str:
    """Terse: lowercase plain-line headings, one bullet per clause, no full stops."""
    lines = [f"title: {c['title'][0]}"]
    for key, heading in list(SECTIONS.items())[1:]:
        lines += ["", f"{heading.lower()}:", *(f"- {x}" for x in c[key])]
    return "\n".join(lines) + "\n"


def ai_style(c: dict[str, list[str]]) -> str:
    """Verbose: Markdown headings, clauses joined into long capitalised sentences."""
    parts = [f"# {c['title'][0][:1].upper()}{c['title'][0][1:]}"]
    for key, heading in list(SECTIONS.items())[1:]:
        first, *rest = c[key]
        body = first[:1].upper() + first[1:]
        for i, x in enumerate(rest):
            body += (", and " if i % 2 == 0 else "; ") + x
        parts.append(f"## {heading}\n\n{body}.")
    return "\n\n".join(parts) + "\n"


def synthetic(n_per_source: int, seed: int = 7) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    texts, labels = [], []
    for _ in range(n_per_source):
        texts.append(human_style(clauses(rng)))
        labels.append("human")
        texts.append(ai_style(clauses(rng)))
        labels.append("ai")
    return texts, labels


def rewrite(text: str, style: str) -> str:
    """The test server's normalization answer, without the HTTP round trip."""
    return answer_for(normalization_messages(text), Rules(normalize_style=style), random.Random())


# --------------------------------------------------------------------------- pure


def test_clearly_different_styles_are_told_apart_and_a_canonical_rewrite_hides_them():
    texts, labels = synthetic(30)
    before = leakage_classifier(texts, labels, seed=1, n_permutations=19, n_bootstrap=500)
    assert before.auc >= 0.98 and before.ci_low > 0.9 and before.p_value == pytest.approx(0.05)
    assert before.verdict.startswith("easy to tell apart")
    assert any(
        "bullet" in name or "heading" in name for name, _ in before.tells_ai + before.tells_human
    )

    # Re-rendering into the template only fixes the headings: the bullets still leak.
    templated = [rewrite(t, "template") for t in texts]
    assert leakage_classifier(templated, labels, seed=1, n_permutations=0).auc >= 0.95

    canonical = [rewrite(t, "canonical") for t in texts]
    after = leakage_classifier(canonical, labels, seed=1, n_permutations=19, n_bootstrap=500)
    assert abs(after.auc - 0.5) < 0.15 and after.ci_low < 0.5 < after.ci_high
    assert after.p_value > 0.1 and after.verdict.startswith("no better than chance")
    assert "stays below easy separation" in after.verdict


def test_the_check_is_reproducible_from_its_seed_and_round_trips_through_json():
    texts, labels = synthetic(10)
    a = leakage_classifier(texts, labels, seed=3, n_permutations=5, n_bootstrap=200)
    b = leakage_classifier(texts, labels, seed=3, n_permutations=5, n_bootstrap=200)
    assert a == b
    assert LeakageResult.from_dict(a.to_dict()) == a
    no_p = leakage_classifier(texts, labels, seed=3, n_permutations=0, n_bootstrap=0)
    assert no_p.to_dict()["p_value"] is None and math.isnan(
        LeakageResult.from_dict(no_p.to_dict()).p_value
    )


@pytest.mark.parametrize(
    ("auc", "ci", "n", "kind", "start"),
    [
        # The walk's case: 4 ideas per source, an interval from below chance to 1.
        (0.81, (0.44, 1.00), 4, "too_few", "too few ideas to tell"),
        (0.62, (0.35, 0.79), 30, "chance", "no better than chance"),
        (0.55, (0.30, 0.78), 4, "chance", "no better than chance"),
        (1.00, (1.00, 1.00), 4, "easy", "easy to tell apart"),
        (0.95, (0.88, 1.00), 30, "easy", "easy to tell apart"),
        (0.75, (0.62, 0.86), 30, "often", "the source can often be told"),
        (0.62, (0.53, 0.71), 30, "slight", "the source can be told slightly"),
        (0.20, (0.05, 0.40), 30, "below_chance", "below chance"),
        (0.14, (0.00, 0.36), 8, "below_chance", "below chance"),
    ],
)
def test_the_reading_follows_the_interval_and_the_sample_size(auc, ci, n, kind, start):
    assert reading(auc, *ci) == kind
    words = verdict(auc, *ci, n_ai=n, n_human=n)
    assert words.startswith(start), words
    # a small source is said to be small; a large one is not
    assert (f"{n} ideas" in words) == (n < 10), words
    if kind == "too_few":  # the interval reads as on the report and judge pages
        assert f"({ci[0]:.2f} to {ci[1]:.2f})" in words, words


def test_a_below_chance_auc_blames_the_labels_only_on_a_large_sample():
    """Cross-validation on a few balanced ideas pulls the AUC below chance by itself, so
    a small sample's below-chance AUC is read as that effect, not as wrong labels."""
    small = verdict(0.14, 0.00, 0.36, n_ai=8, n_human=8)
    assert "small-sample effect of cross-validation" in small, small
    assert "systematically wrong" not in small
    assert "only if the AUC stays below chance with more ideas" in small
    large = verdict(0.20, 0.05, 0.40, n_ai=30, n_human=30)
    assert "systematically wrong (check the labels)" in large, large
    assert "small-sample" not in large
    # the smaller source decides: 8 labelled ideas against 40 is still a small sample
    assert "small-sample" in verdict(0.14, 0.00, 0.36, n_ai=40, n_human=8)
    # without the sizes nothing says the sample is small
    assert "check the labels" in verdict(0.14, 0.00, 0.36)


def test_a_wide_interval_is_never_read_as_no_better_than_chance():
    """However the estimate falls, an interval reaching both chance and easy separation
    says the sample is too small, not that the sources cannot be told apart."""
    for auc in np.linspace(0.3, 0.95, 14):
        assert reading(float(auc), 0.45, 0.9) == "too_few"
        assert not verdict(float(auc), 0.45, 0.9).startswith("no better than chance")


def test_too_few_ideas_per_source_are_refused_with_a_clear_message():
    texts, labels = synthetic(9)
    with pytest.raises(LeakageError, match=r"at least 10 ideas of each source .* 9 human and 9 AI"):
        leakage_classifier(texts, labels, folds=5)
    assert max_folds(labels) == 4 and max_folds(labels[:6]) == 0
    with pytest.raises(LeakageError, match="expected 'ai' or 'human'"):
        leakage_classifier(texts, ["robot"] * len(texts))
    with pytest.raises(LeakageError, match="2 ideas have no text"):
        leakage_classifier(["", " ", *texts[2:]], labels, folds=2)


def test_fixed_guesses_are_scored_the_same_way():
    labels = ["ai", "human"] * 20
    perfect = auc_with_ci(labels, [1.0 if x == "ai" else 0.0 for x in labels], seed=0)
    assert perfect.auc == perfect.ci_low == perfect.ci_high == 1.0 and perfect.p_value < 0.01
    coin = auc_with_ci(labels, [0.5] * len(labels), seed=0)
    assert coin.auc == 0.5 and coin.p_value > 0.5
    assert auc_score([1, 0, 1, 0], [0.9, 0.1, 0.2, 0.8]) == 0.75


def test_the_source_guess_is_read_from_the_answer():
    assert parse_source_guess("AI probability: 85") == 0.85
    assert parse_source_guess("Reasoning…\nai probability = 12%") == 0.12
    assert parse_source_guess("It was probably a person.") is None
    assert parse_source_guess("AI probability: 250") is None
    messages = source_guess_messages("## 1. Title\n\nX")
    assert "AI probability: N" in messages[0]["content"] and "<<<" in messages[1]["content"]


def test_style_features_see_bullets_headings_and_case():
    terse, verbose = synthetic(1)[0]
    f = dict(zip(STYLE_FEATURES, style_features(terse), strict=True))
    g = dict(zip(STYLE_FEATURES, style_features(verbose), strict=True))
    assert f["bullet lines"] > 0.5 and g["bullet lines"] == 0
    assert g["heading lines"] > 0.5 and f["heading lines"] == 0
    assert f["lines starting lowercase"] > g["lines starting lowercase"]
    assert g["mean sentence length"] > f["mean sentence length"]


def test_the_plot_is_an_inline_svg_with_both_sides():
    texts, labels = synthetic(10)
    r = leakage_classifier(texts, labels, n_permutations=0, n_bootstrap=100).to_dict()
    svg = leakage_svg([("raw text", r), ("normalised", {**r, "auc": 0.5})])
    assert svg.startswith("<svg") and "raw text" in svg and "normalised" in svg


# --------------------------------------------------------------------------- service and page


@pytest.fixture
def styled_study(db, owner):
    """30 human and 30 AI ideas in two clearly different styles, the same content words."""
    study = study_create(owner=owner, slug="leak", title="Leakage study")
    topic = Topic.objects.create(study=study, name="Factuality")
    human = Condition.objects.create(study=study, key="Human", kind=Condition.Kind.HUMAN)
    ai = Condition.objects.create(study=study, key="AI", kind=Condition.Kind.AI)
    texts, labels = synthetic(30)
    for n, (text, label) in enumerate(zip(texts, labels, strict=True)):
        idea = Idea.objects.create(study=study, topic=topic, title=f"idea {n}", raw_text=text)
        IdeaCondition.objects.create(
            idea=idea, condition=ai if label == "ai" else human, study=study, external_id=f"i{n}"
        )
    return study


@pytest.mark.slow
def test_the_leakage_job_reports_auc_near_1_before_and_near_half_after_the_rewrite(
    styled_study, owner, django_capture_on_commit_callbacks, monkeypatch
):
    study = styled_study
    # The similarity check's embedding is not what this test is about, and costs ~0.3 s
    # of CPU per idea: every text gets the same vector.
    monkeypatch.setattr(
        "studies.embeddings.embed", lambda texts: np.ones((len(texts), 384), dtype=np.float32)
    )
    c = Client()
    c.force_login(owner)
    url = reverse("studies:leakage", args=[study.slug])
    assert "30 human, 30 AI" in c.get(url).content.decode()

    # The test server rewrites every idea into one house style, over HTTP.
    with TestServer(Rules(normalize_style="canonical")) as server:
        study.normalization_config = JudgeConfig.objects.create(
            name="canonical", base_url=server.base_url, model="scripted", concurrency=4
        )
        study.save()
        with django_capture_on_commit_callbacks(execute=False):
            job = services.normalization_enqueue(study=study, actor=owner)
        normalize_ideas(job.pk)
        assert server.answered == 60
        for idea in study.ideas.all():
            services.normalization_approve(idea=idea, actor=owner)

        # The check, with the same model also asked to guess each text's source.
        with django_capture_on_commit_callbacks(execute=False) as callbacks:
            response = c.post(url, {"form": "classifier", "llm": "on"}, HTTP_HX_REQUEST="true")
        assert len(callbacks) == 1
        body = response.content.decode()
        assert 'hx-trigger="every 1s"' in body and 'id="leakage-progress"' in body
        job = JobRun.objects.get(study=study, kind=services.LEAKAGE_JOB)
        # A fixed seed: the check draws its folds at random, and with 60 texts the
        # after-rewrite AUC of an unlucky draw reaches 0.65 (seen once in CI).
        job.params["seed"] = 1
        job.params["n_permutations"] = 19  # keep the test quick; the default is 100
        job.params["n_bootstrap"] = 500
        job.save()
        check_leakage(job.pk)
        assert server.answered == 60 + 120
    job.refresh_from_db()
    assert job.status == JobRun.Status.DONE and job.done == job.total == 160
    before, after = job.params["result"]["before"], job.params["result"]["after"]
    assert before["auc"] >= 0.98 and before["ci_low"] > 0.9
    assert abs(after["auc"] - 0.5) < 0.15 and after["ci_low"] < 0.5 < after["ci_high"]
    assert before["n_human"] == after["n_ai"] == 30
    # The scripted model guesses from headings and bullets: right before, a coin after.
    assert before["llm"]["auc"] == 1.0 and before["llm"]["answered"] == 60
    assert after["llm"]["auc"] == 0.5 and after["llm"]["p_value"] > 0.5
    # the guesses' calls belong to the study: its export carries them, its delete removes them
    guessed = services.leakage_call_ids(study)
    assert len(guessed) == 120 and LLMCall.objects.filter(pk__in=guessed).count() == 120

    poll = c.get(
        reverse("studies:job_status", args=[job.study.slug, job.pk]), HTTP_HX_REQUEST="true"
    )
    assert poll["HX-Refresh"] == "true"
    page = c.get(url).content.decode()
    assert f"{before['auc']:.2f}" in page and f"{after['auc']:.2f}" in page
    assert 'id="leakage-plot"' in page and "<svg" in page
    assert "no better than chance" in page
    assert 'id="leakage-llm-after"' in page and "60 of 60" in page


def test_the_check_says_why_it_cannot_run_on_a_small_study(db, owner):
    study = study_create(owner=owner, slug="tiny", title="Tiny")
    topic = Topic.objects.create(study=study, name="T")
    human = Condition.objects.create(study=study, key="Human", kind=Condition.Kind.HUMAN)
    texts, _ = synthetic(3)
    for n, text in enumerate(texts):
        idea = Idea.objects.create(study=study, topic=topic, title=f"{n}", raw_text=text)
        IdeaCondition.objects.create(idea=idea, condition=human, study=study, external_id=f"{n}")
    c = Client()
    c.force_login(owner)
    url = reverse("studies:leakage", args=[study.slug])
    response = c.post(url, {"form": "classifier"}, follow=True)
    assert "at least 4 ideas of each source" in response.content.decode()
    assert not JobRun.objects.filter(study=study, kind=services.LEAKAGE_JOB).exists()


def test_ideas_without_a_text_are_left_out_of_the_check_and_counted_in_its_notes(
    styled_study, owner
):
    """Ideas that came with imported reviews have no text: an empty string has no style,
    and counting it as a human or AI sample would teach the classifier nothing true."""
    topic = styled_study.topics.get()
    human = styled_study.conditions.get(key="Human")
    for n in range(3):
        idea = Idea.objects.create(study=styled_study, topic=topic, title=f"bare {n}")
        IdeaCondition.objects.create(
            idea=idea, condition=human, study=styled_study, external_id=f"bare{n}"
        )
    samples, notes = services.leakage_samples(styled_study)
    assert len(samples["before"].texts) == 60 and all(t.strip() for t in samples["before"].texts)
    assert "3 ideas without a raw text are left out of “before”" in notes
    c = Client()
    c.force_login(owner)
    page = c.get(reverse("studies:leakage", args=[styled_study.slug])).content.decode()
    assert "30 human, 30 AI" in page and "33 human" not in page
    assert "3 ideas without a raw text are left out" in page


def test_another_researcher_cannot_run_or_see_the_check(styled_study, other_researcher):
    c = Client()
    c.force_login(other_researcher)
    url = reverse("studies:leakage", args=[styled_study.slug])
    assert c.get(url).status_code == 404
    assert c.post(url, {"form": "classifier"}).status_code == 404
    assert c.get(url + "?fragment=job", HTTP_HX_REQUEST="true").status_code == 404
    assert not JobRun.objects.filter(kind=services.LEAKAGE_JOB).exists()


@pytest.fixture
def unnormalised_study(db, owner):
    """8 human and 8 AI ideas whose approved text kept the raw styles (a rewrite that
    changed nothing): what reviewers would read gives the source away."""
    study = study_create(owner=owner, slug="leaky", title="Leaky study")
    topic = Topic.objects.create(study=study, name="Factuality")
    human = Condition.objects.create(study=study, key="Human", kind=Condition.Kind.HUMAN)
    ai = Condition.objects.create(study=study, key="AI", kind=Condition.Kind.AI)
    texts, labels = synthetic(8, seed=3)
    for n, (text, label) in enumerate(zip(texts, labels, strict=True)):
        idea = Idea.objects.create(
            study=study,
            topic=topic,
            title=f"idea {n}",
            raw_text=text,
            normalized_text=text,
            normalization_status=Idea.NormalizationStatus.APPROVED,
        )
        IdeaCondition.objects.create(
            idea=idea, condition=ai if label == "ai" else human, study=study, external_id=f"i{n}"
        )
    return study


def _run_check(study, owner, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        job = services.leakage_check_enqueue(
            study=study, actor=owner, seed=1, n_permutations=9, n_bootstrap=300
        )
    check_leakage(job.pk)
    job.refresh_from_db()
    return job


def test_opening_a_study_whose_reviewer_texts_leak_takes_a_typed_acknowledgement(
    unnormalised_study, owner, django_capture_on_commit_callbacks
):
    study = unnormalised_study
    job = _run_check(study, owner, django_capture_on_commit_callbacks)
    after = job.params["result"]["after"]
    assert services.leakage_side_reading(after)[0] == "easy", after
    c = Client()
    c.force_login(owner)
    page = c.get(reverse("studies:study_open", args=[study.slug])).content.decode()
    assert 'id="open-leakage"' in page and services.LEAKAGE_ACKNOWLEDGEMENT in page

    url = reverse("studies:study_open", args=[study.slug])
    for typed in ("", "yes", "open anyway"):
        response = c.post(url, {"acknowledgement": typed}, follow=True)
        assert "easy to tell apart by source" in response.content.decode()
        study.refresh_from_db()
        assert study.status == "draft"
    assert not AuditEvent.objects.filter(study=study, verb="study_opened_for_review").exists()

    c.post(url, {"acknowledgement": "  Reviewers may tell the sources  apart. "})
    study.refresh_from_db()
    assert study.status == "reviewing"
    event = AuditEvent.objects.get(study=study, verb="study_opened_for_review")
    assert event.actor == owner
    assert event.detail["leakage_acknowledged"] == "Reviewers may tell the sources apart."
    assert event.detail["leakage_check"] == job.pk
    assert event.detail["leakage_auc"] == after["auc"]


def test_a_check_that_cannot_tell_the_texts_apart_asks_for_no_acknowledgement(
    unnormalised_study, owner, django_capture_on_commit_callbacks
):
    study = unnormalised_study
    for idea in study.ideas.all():  # one house style for every approved text
        idea.normalized_text = rewrite(idea.raw_text, "canonical")
        idea.save(update_fields=["normalized_text"])
    job = _run_check(study, owner, django_capture_on_commit_callbacks)
    assert services.leakage_side_reading(job.params["result"]["after"])[0] != "easy"
    assert services.study_open_status(study)["leakage"] is None
    services.study_open_for_review(study=study, actor=owner)
    event = AuditEvent.objects.get(study=study, verb="study_opened_for_review")
    assert "leakage_acknowledged" not in event.detail
