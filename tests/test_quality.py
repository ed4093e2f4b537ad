"""Quality control through the app: attention checks on the review page, gold items (kept
out of the analysis and blind to reviewers), the flags on the progress page and in the
report with the with/without table, and gold items dealt at assignment commit."""

from __future__ import annotations

import dataclasses

import pytest
from django.template.loader import render_to_string
from django.urls import reverse

from studies.analysis.quality import FLAG_KINDS
from studies.analysis.report import ReportOptions
from studies.models import Assignment, Idea, Review
from studies.protocol.forms import SI2024_FORM, AttentionCheck, Scale
from studies.report_files import report_build
from studies.reviewer_forms import ReviewAnswersForm
from studies.selectors import review_frame
from studies.services.assignment import assignment_commit, assignment_preview
from studies.services.plans import study_plan
from studies.services.quality import GoldRefused, idea_gold_set, study_quality
from studies.services.reviews import review_submit
from studies.services.study import study_form_set, study_plan_set

from .factories import make_review_study, review_study

CHECK = AttentionCheck(
    scale=Scale(
        key="careful",
        label="Careful reading",
        question="To show that you read every question, choose 3 on this scale.",
        minimum=1,
        maximum=10,
        anchors={},
        rationale=False,
        rationale_required=False,
    ),
    expected=3,
    after="feasibility",
)
FORM = dataclasses.replace(SI2024_FORM, key="qc-test", version=1, attention_checks=(CHECK,))
METRICS = FORM.metric_keys
PASTED = (  # 41 words: the only rationale long enough for the plan's duplicate check
    "This proposal hinges on a retrieval step whose recall is never measured, so the claimed "
    "gains may come from the benchmark overlap rather than the method, and the plan should "
    "add an ablation without retrieval and report variance over several seeds"
)


def _words(seed: int) -> str:
    # 26 words: above the form's 25, below the plan's duplicate_min_words, so only the
    # pasted rationale is compared.
    return " ".join(f"point{seed}x{k}" for k in range(26))


def _submit(a: Assignment, *, scores, careful=3, seconds=900.0, pasted=False):
    data = {m: str(s) for m, s in zip(METRICS, scores, strict=True)}
    for k, m in enumerate(METRICS):
        data[f"{m}_rationale"] = PASTED if pasted and k == 0 else _words(a.pk * 10 + k)
    data.update(familiarity="3", confidence="4", minutes="20", careful=str(careful))
    form = ReviewAnswersForm(data, definition=FORM)
    assert form.is_valid(), form.errors
    Assignment.objects.filter(pk=a.pk).update(active_seconds=seconds)
    a.refresh_from_db()
    review_submit(assignment=a, cleaned=form.cleaned_data)


@pytest.fixture
def qc(db, owner):
    """Six reviewers, six ideas (Human, AI alternating), three each; idea 6 is gold.
    R002 straight-lines and fails the attention check; R003 is fast and pastes R001's
    rationale; the others answer honestly, Human a little higher."""
    s = review_study(owner, slug="qc", n_reviewers=6, n_ideas=6, per_reviewer=3)
    study_form_set(study=s.study, definition=FORM)
    idea_gold_set(idea=s.ideas[5], ranges={"overall": [1, 3]}, actor=owner)
    study_plan_set(
        study=s.study,
        source={
            "primary_metrics": ["overall"],
            "quality": {
                "min_minutes": 2,
                "duplicate_min_words": 40,
                "exclude": ["straight_line", "fast", "gold"],
            },
        },
        actor=owner,
    )
    for j, reviewer in enumerate(s.reviewers):
        for a in s.assignments[reviewer.pk]:
            human = a.idea.memberships.get().condition.key == "Human"
            base = 6 + (1 if human else 0) + (j % 3) - 1
            scores = [min(10, max(1, base + (k % 3) - 1)) for k in range(len(METRICS))]
            if a.idea_id == s.ideas[5].pk:
                scores[METRICS.index("overall")] = 2  # the gold idea is plainly weak
            if j == 1:
                _submit(a, scores=[6] * len(METRICS), careful=7)
            elif j == 2:
                _submit(a, scores=scores, seconds=30.0, pasted=a.idea_id == s.ideas[0].pk)
            else:
                _submit(a, scores=scores, pasted=j == 0 and a.idea_id == s.ideas[0].pk)
    return s


def test_flags_name_each_problem_and_gold_reviews_stay_out_of_the_analysis(qc, client, owner):
    quality = study_quality(qc.study, plan=_plan(qc))
    by = quality.by_reviewer()
    assert by["R002"] == {"straight_line": 3, "attention": 3, "gold": 1}
    assert by["R003"] == {"fast": 3, "duplicate_other": 1}
    assert by["R001"] == {"duplicate_other": 1}
    assert set(by) == {"R001", "R002", "R003"}
    # The attention answer is stored with the review, never as a score.
    review = Review.objects.filter(reviewer=qc.reviewers[1]).first()
    assert review.extra["attention"] == {"careful": 7}
    assert set(review.scores.values_list("metric", flat=True)) == set(METRICS)
    frame = review_frame(qc.study)
    assert len(frame) == 15 and "careful" not in frame.columns
    gold_reviews = Review.objects.filter(idea=qc.ideas[5]).values_list("pk", flat=True)
    assert not set(frame["review_id"]) & {str(pk) for pk in gold_reviews}

    client.force_login(owner)
    page = client.get(reverse("studies:study_progress", args=[qc.study.slug])).content.decode()
    assert 'id="quality-flags"' in page
    assert "overall 6 outside 1–3" in page and "careful: answered 7, instructed 3" in page


def _plan(qc):
    return study_plan(qc.study)


def test_reviewers_see_the_attention_check_but_never_gold_or_their_flags(qc, client):
    client.force_login(qc.users[1])  # R002: a gold miss, straight-lining, failed checks
    gold = Assignment.objects.get(reviewer=qc.reviewers[1], idea=qc.ideas[5])
    pages = [
        client.get(reverse("studies:review_page", args=[gold.pk])),
        client.get(reverse("studies:reviewer_home")),
    ]
    for response in pages:
        assert response.status_code == 200
        text = response.content.decode().lower()
        for secret in ("gold", "straight", "flag", "attention check", "1–3", "[1, 3]"):
            assert secret not in text, secret
    review_page = pages[0].content.decode()
    # The check sits between feasibility and the next metric, answered as submitted.
    assert review_page.index("field-feasibility") < review_page.index("field-careful")
    assert review_page.index("field-careful") < review_page.index("field-effectiveness")
    assert 'name="careful" value="7" checked' in review_page
    # The gold page is the team's: a reviewer gets the 404 of a study not theirs.
    assert client.get(reverse("studies:ideas_gold", args=[qc.study.slug])).status_code == 404


def test_a_reviewed_idea_cannot_become_gold_and_bad_ranges_are_named(qc, owner, client):
    with pytest.raises(GoldRefused, match="has reviews already"):
        idea_gold_set(idea=qc.ideas[0], ranges={"overall": [1, 2]}, actor=owner)
    fresh = Idea.objects.create(study=qc.study, topic=qc.ideas[0].topic, title="Fresh")
    client.force_login(owner)
    url = reverse("studies:ideas_gold", args=[qc.study.slug])
    bad = client.post(url, {"idea": fresh.pk, "ranges": '{"overall": [0, 12]}'}, follow=True)
    assert "the range 0–12 must have low ≤ high within the scale 1–10" in bad.content.decode()
    client.post(url, {"idea": fresh.pk, "ranges": '{"novelty": [7, 10]}'})
    fresh.refresh_from_db()
    assert fresh.gold_ranges == {"novelty": [7.0, 10.0]}


def test_a_review_rejected_for_payment_is_flagged_and_only_a_planned_rule_removes_it(qc, owner):
    """Paying is not analysing: a rejection (a decision made after reading the review) is
    shown as a flag, without the owner's reason, and leaves the analysis only by a rule
    of the plan, so nobody drops reviews from the analysis by refusing to pay for them."""
    from studies.analysis.quality import exclusions
    from studies.services.payments import review_decide

    honest = Review.objects.filter(reviewer=qc.reviewers[3]).order_by("pk").first()
    review_decide(review=honest, decision="rejected", reason="Dr Jones copied it", actor=owner)
    quality = study_quality(qc.study, plan=_plan(qc))
    rejected = [f for f in quality.flags if f.kind == "rejected"]
    assert [(f.review_id, f.reviewer_id) for f in rejected] == [(str(honest.pk), "R004")]
    assert "Jones" not in rejected[0].detail and rejected[0].kind in FLAG_KINDS
    # An acceptance is no flag.
    other = Review.objects.filter(reviewer=qc.reviewers[4]).order_by("pk").first()
    review_decide(review=other, decision="accepted", actor=owner)
    assert [f.review_id for f in study_quality(qc.study, plan=_plan(qc)).flags
            if f.kind == "rejected"] == [str(honest.pk)]  # fmt: skip
    # The fixture's plan names no rule for it: the review stays in the analysis ...
    plan = _plan(qc)
    kept = exclusions(quality.flags, plan.quality.exclude, quality.reviews)
    assert str(honest.pk) not in kept.removed
    # ... until a plan's rule names the flag.
    study_plan_set(
        study=qc.study,
        source={"primary_metrics": ["overall"], "quality": {"exclude": ["rejected"]}},
        actor=owner,
    )
    plan = _plan(qc)
    removed = exclusions(quality.flags, plan.quality.exclude, quality.reviews)
    assert removed.removed == [str(honest.pk)] and removed.kept == removed.analysed - 1


@pytest.mark.slow
def test_the_report_shows_the_primary_tests_with_and_without_and_what_each_rule_removed(
    qc, tmp_path, settings
):
    settings.IDEAREVIEW_CHROMIUM = str(tmp_path / "no-chromium")
    options = ReportOptions(
        consistency_splits=5, consistency_bootstrap=5, consistency_permutations=5,
        mixed_starts=1, agreement_splits=5, agreement_bootstrap=5, agreement_permutations=5,
        ordinal="none",
    )  # fmt: skip
    report = report_build(study=qc.study, out_dir=tmp_path / "r", options=options).data
    q = report["quality"]
    assert q["exclusion"]["planned"] is True
    assert q["exclusion"]["analysed"] == 15 and q["exclusion"]["kept"] == 10
    rules = {r["rule"]: (r["reviews"], r["only_this_rule"]) for r in q["exclusion"]["rules"]}
    # R002's two analysed reviews go by straight-lining and by the gold miss alike.
    assert rules == {"straight_line": (2, 0), "fast": (3, 3), "gold (whole reviewer)": (2, 0)}
    rows = {(r["test"], r["condition"]): r for r in q["with_without"]}
    assert set(rows) == {("by_review", "AI"), ("by_idea", "AI"), ("by_reviewer", "AI")}
    # AI's analysed ideas 2 and 4 have 3 reviews each; R003 (fast) reviewed idea 2 and
    # R002 (straight-lining) idea 4.
    assert rows[("by_review", "AI")]["n_all"] == 6 and rows[("by_review", "AI")]["n_kept"] == 4
    assert {r["reviewer_id"] for r in q["leniency"]["overall"]["rows"]} == {
        f"R{j:03d}" for j in range(1, 7)
    }
    csvs = report["files"]["csv"]
    for name in ("quality_flags", "quality_exclusions", "quality_with_without", "leniency"):
        assert f"{name}.csv" in csvs
    html = (tmp_path / "r" / "report.html").read_text()
    assert "Primary tests with and without the removed reviews" in html


def test_commit_deals_each_reviewer_a_gold_item_outside_the_programs_counts(owner):
    seeded = make_review_study(owner, slug="goldassign", commit=False)
    gold = seeded.ideas[0]
    idea_gold_set(idea=gold, ranges={"overall": [1, 3]}, actor=owner)
    job, result, plan = assignment_preview(study=seeded.study, seed=3)
    assert result.feasible and gold.pk not in {i.pk for i in plan.idea_by_id.values()}
    summary = assignment_commit(study=seeded.study, job=job)
    golds = Assignment.objects.filter(study=seeded.study, idea=gold)
    # Every reviewer may have it except those of the author's institution.
    allowed = [r for r in seeded.reviewers if r.institution != gold.author_institution]
    assert summary["gold"] == golds.count() == len(allowed)
    assert {a.reviewer_id for a in golds} == {r.pk for r in allowed}


def test_the_report_section_shows_an_emptied_condition_beside_its_all_review_figures():
    def row(condition, **kept):
        return {
            "test": "by_review", "metric": "overall", "condition": condition,
            "diff_all": -0.5, "n_all": 6, "p_adjusted_all": 0.04, "reject_all": True,
            "diff_kept": None, "n_kept": None, "p_adjusted_kept": None, "reject_kept": None,
            "changed": None, "kept_note": "", **kept,
        }  # fmt: skip

    q = {
        "kinds": FLAG_KINDS,
        "thresholds": {"min_minutes": 2, "straight_line_items": 3, "duplicate_cosine": 0.95},
        "counts": {"attention": 2},
        "exclusion": {
            "planned": True,
            "removed": ["1", "2"],
            "analysed": 8,
            "kept": 6,
            "rules": [],
        },
        "with_without": [
            row("AI", diff_kept=-0.25, p_adjusted_kept=0.2, reject_kept=False, changed=True),
            row("X", kept_note="no reviews of X are left"),
        ],
        "with_without_note": "",
        "leniency": {},
    }
    html = render_to_string("studies/_report_quality.html", {"r": {"quality": q}})
    body = html[html.index('id="quality-with-without"') :]
    ai, x = body.split("<tr>")[2:4]
    assert "-0.25" in ai and "no (changed)" in ai
    assert ">-0.50<" in x and "0.04" in x and ">yes<" in x
    assert '<td class="l" colspan="3">no reviews of X are left</td>' in x


def test_an_imported_studys_exclusion_block_counts_the_reviews_the_analysis_reads(si2024_study):
    """Imported reviews have no reviewer: the quality block still counts every review the
    frame analyses, and those flagged at import (kept), not "0 of 0"."""
    from studies.analysis.quality import exclusions
    from studies.analysis.quality_report import rules_in_force

    study = si2024_study
    analysed = review_frame(study)["review_id"].nunique()
    flagged = study.reviews.filter(status="submitted").exclude(flags=[]).count()
    assert analysed > 0 and flagged > 0
    plan = study_plan(study)
    q = study_quality(study, plan=plan, embed_limit=0)
    excl = exclusions(q.flags, rules_in_force(plan)[0], q.reviews)
    assert excl.analysed == analysed
    assert excl.kept == analysed - len(excl.removed)
    assert excl.flagged_at_import == flagged
    block = {
        "kinds": FLAG_KINDS,
        "thresholds": {},
        "counts": {},
        "exclusion": {**excl.as_dict(), "planned": False},
        "with_without": [],
        "leniency": {},
    }
    html = render_to_string("studies/_report_quality.html", {"r": {"quality": block}})
    assert f"of {analysed} analysed reviews removed" in html
    assert f"{flagged} of the analysed reviews were flagged when their file was imported" in html


@pytest.mark.parametrize("default", [True, False])
def test_the_with_without_table_says_the_plans_sidedness_correction_and_alpha(default):
    """Its adjusted p and decisions are the plan's, so under a plan other than the
    default its header says which test they come from, as the Tests tables do; under the
    default plan the header keeps its wording."""
    q = {
        "kinds": FLAG_KINDS,
        "thresholds": {},
        "counts": {},
        "exclusion": {"planned": True, "removed": [], "analysed": 4, "kept": 4, "rules": []},
        "with_without": [],
        "with_without_note": "",
        "leniency": {},
    }
    voice = {
        "default": default,
        "sidedness_text": "one-sided (AI > Human)",
        "method_label": "Benjamini–Hochberg",
        "alpha": 0.05,
    }
    html = render_to_string(
        "studies/_report_quality.html", {"r": {"quality": q, "plan": {"voice": voice}}}
    )
    head = html[html.index('id="quality-with-without"') :]
    head = head[: head.index("</thead>")]
    said = "The analysis plan: one-sided (AI &gt; Human); Benjamini–Hochberg; α = 0.05" in head
    assert said is not default
    assert "<th>p adj. (all)</th><th>Rejected (all)</th>" in head
