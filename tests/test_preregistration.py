"""The pre-registration document: a datasheet of the study from its rows and its plan,
with the plan's hash and its own, downloadable from the plan page and in the package."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from studies.design_sizing import SizingRequest, sizing_enqueue
from studies.package import package_build
from studies.preregistrations import study_preregistration
from studies.protocol.preregistration import PREREGISTRATION_SECTIONS
from studies.services.study import study_plan_freeze, study_plan_set
from studies.tasks import size_design
from tests.factories import make_pilot_study

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

PLAN = {
    "primary_metrics": ["overall"],
    "secondary_metrics": ["novelty"],
    "tests": ["by_idea", "mixed"],
    "hypotheses": [{"direction": "AI > Human"}],
    "multiple_testing": {"method": "holm", "families": "per_test"},
    "alpha": 0.05,
    "primary": {"metric": "overall", "test": "by_idea", "condition": "AI", "effect": 0.8},
}


@pytest.fixture
def study(owner, django_capture_on_commit_callbacks):
    study = make_pilot_study(owner, slug="prereg")
    study.payment_per_review = "25.00"
    study.save()
    study_plan_set(study=study, source=PLAN, actor=owner)
    with django_capture_on_commit_callbacks(execute=False):
        job = sizing_enqueue(
            study=study,
            actor=owner,
            request=SizingRequest(
                metric="overall", test="by_idea", condition="AI", effect=0.8,
                reviews_per_idea=(3,), n_boot=20, n_reps=120, seed=4,
            ),
        )  # fmt: skip
    size_design(job.pk)
    job.refresh_from_db()
    study.sizing_job = job
    return study


def _recomputed_hash(doc: dict) -> str:
    body = {k: v for k, v in doc.items() if k != "document_sha256"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def test_the_document_describes_the_study_from_its_rows_with_both_hashes(study, owner):
    study_plan_freeze(study=study, actor=owner)
    study.refresh_from_db()
    doc, md = study_preregistration(study)

    assert doc["schema"] == "ideareview.preregistration/1"
    assert doc["registration"]["plan_sha256"] == study.analysis_plan_hash
    assert doc["registration"]["frozen_at"] and not doc["registration"]["deviation"]
    assert doc["document_sha256"] == _recomputed_hash(doc)
    assert f"`{study.analysis_plan_hash}`" in md and f"`{doc['document_sha256']}`" in md
    for _key, heading in PREREGISTRATION_SECTIONS:
        assert f"## {heading}" in md

    # The form with its anchors, from the study's form definition.
    form = study.form_definition()
    overall = form.metric("overall")
    listed = next(m for m in doc["instrument"]["metrics"] if m["key"] == "overall")
    assert listed["anchors"] == {str(k): v for k, v in overall.anchors.items()}
    for score, text in overall.anchors.items():
        assert f"  - {score}: {text}" in md
    # The design and the payments, from the study's fields.
    a = doc["assignment"]
    assert (a["min_reviews_per_idea"], a["max_reviews_per_idea"]) == (
        study.min_reviews_per_idea,
        study.max_reviews_per_idea,
    )
    assert f"Each idea receives {study.min_reviews_per_idea}–{study.max_reviews_per_idea}" in md
    assert "per review 25.00 USD" in md
    assert [c["ideas"] for c in doc["evaluated"]["conditions"]] == [16, 16]
    # The tests as registered.
    assert (
        doc["analysis"]["method_label"] == "Holm" and "AI > Human" in doc["analysis"]["hypotheses"]
    )
    assert "Multiple testing: Holm" in md and '"primary"' in md
    # No exclusion rule registered, and the document says so.
    assert doc["exclusions"] == [] and "No exclusion rules are registered" in md
    # The power analysis is the sizing job's.
    result = study.sizing_job.params["result"]
    assert doc["power"]["design"] == result["design"]
    assert f"Recommended: {result['design']['n_reviews']} reviews" in md


def test_nothing_personal_enters_the_document(study):
    doc, md = study_preregistration(study)
    text = md + json.dumps(doc)
    for reviewer in study.reviewers.all():
        assert reviewer.email not in text and reviewer.pseudonym not in text
    for idea in study.ideas.all()[:5]:
        assert idea.title not in text


def test_before_freezing_it_says_not_registered_and_after_a_change_it_keeps_the_registered_plan(
    study, owner
):
    _doc, md = study_preregistration(study)
    assert "not registered yet" in md
    study_plan_freeze(study=study, actor=owner)
    study.refresh_from_db()
    study_plan_set(study=study, source={**PLAN, "alpha": 0.01}, actor=owner)
    study.refresh_from_db()
    doc, md = study_preregistration(study)
    assert doc["registration"]["deviation"] is True
    assert "The current plan differs from the registered one" in md
    assert doc["analysis"]["alpha"] == 0.05  # the registered plan's, not the current 0.01
    assert doc["registration"]["plan_sha256"] == study.analysis_plan_hash


def test_downloads_for_the_team_and_nobody_else_and_the_same_document_in_the_package(
    study, owner, tmp_path
):
    c = Client()
    c.force_login(owner)
    plan_page = c.get(reverse("studies:study_plan", args=[study.slug])).content.decode()
    md_url = reverse("studies:study_preregistration", args=[study.slug, "md"])
    json_url = reverse("studies:study_preregistration", args=[study.slug, "json"])
    assert md_url in plan_page and json_url in plan_page
    md = c.get(md_url)
    assert md["Content-Type"].startswith("text/markdown")
    assert "prereg-preregistration.md" in md["Content-Disposition"]
    doc = json.loads(c.get(json_url).content)
    assert doc["document_sha256"] == _recomputed_hash(doc)
    assert (
        c.get(reverse("studies:study_preregistration", args=[study.slug, "txt"])).status_code == 404
    )

    stranger = get_user_model().objects.create_user("stranger", password="stranger-pass-123")
    c.force_login(stranger)
    assert c.get(md_url).status_code == 404 and c.get(json_url).status_code == 404

    out = tmp_path / "package.zip"
    package_build(study=study, out=out, use_report=False)
    with zipfile.ZipFile(io.BytesIO(out.read_bytes())) as z:
        names = z.namelist()
        packaged = json.loads(
            z.read(next(n for n in names if n.endswith("plan/preregistration.json")))
        )
        packaged_md = z.read(
            next(n for n in names if n.endswith("plan/preregistration.md"))
        ).decode()
    assert packaged == doc
    assert packaged_md == md.content.decode()
