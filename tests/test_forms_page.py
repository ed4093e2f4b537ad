"""The review-form page: pick, upload or edit a form, preview it, and the lock once a
study has reviews."""

from __future__ import annotations

import io
import json
import re

import pytest
from django.urls import reverse

from studies.import_samples import review_sample_rows, sample_file
from studies.models import ReviewForm, StudyMember
from studies.protocol.forms import EXECUTION_FORM, SI2024_FORM
from studies.services.study import study_create, study_form_locked_reason, study_form_set
from studies.services.transfer import reviews_import, reviews_parse


@pytest.fixture
def study(db, owner):
    return study_create(owner=owner, slug="formed", title="Formed")


def add_reviews(study) -> None:
    rows = review_sample_rows(study.form_definition(), conditions=["Human", "AI"], topics=[])
    parsed = reviews_parse(
        study=study,
        fmt="generic",
        reviews=sample_file(rows, "csv"),
        reviews_name="sample.csv",
        human_conditions=["Human"],
    )
    reviews_import(study=study, parsed=parsed, kind="generic")


def test_the_page_previews_the_current_form_as_reviewers_see_it(client, owner, study):
    client.force_login(owner)
    page = client.get(reverse("studies:study_form", args=[study.slug])).content.decode()
    assert "The form as reviewers see it" in page
    for m in SI2024_FORM.metrics:
        assert m.label in page and m.question in page.replace("&#x27;", "'")
    assert "Top 15% of all published ideas on this topic" in page.replace("Among the top", "Top")
    assert 'name="definition"' in page and "formed-form" in page  # the copy's key


def test_an_editor_picks_a_built_in_after_previewing_it(client, owner, study):
    client.force_login(owner)
    url = reverse("studies:study_form", args=[study.slug])
    r = client.post(url, {"source": "builtin", "builtin": "execution@1", "intent": "preview"})
    page = r.content.decode()
    assert r.status_code == 200 and "Code quality" in page and "No rationale asked" in page
    study.refresh_from_db()
    assert study.review_form.key == "si2024"  # a preview changes nothing
    r = client.post(url, {"source": "builtin", "builtin": "execution@1", "intent": "use"})
    assert r.status_code == 302
    study.refresh_from_db()
    assert study.form_definition() == EXECUTION_FORM


def selected_builtin(page: str) -> list[str]:
    """The values of the built-in list's selected options."""
    select = page.split('id="id_builtin"', 1)[1].split("</select>", 1)[0]
    return re.findall(r'<option value="([^"]+)" selected>', select)


def test_a_previewed_built_in_stays_selected_so_use_applies_it(client, owner, study):
    client.force_login(owner)
    url = reverse("studies:study_form", args=[study.slug])
    assert selected_builtin(client.get(url).content.decode()) == [f"si2024@{SI2024_FORM.version}"]
    r = client.post(url, {"source": "builtin", "builtin": "execution@1", "intent": "preview"})
    page = r.content.decode()
    assert selected_builtin(page) == ["execution@1"]
    assert "under the built-in list, where it is selected" in page
    # an upload's preview says where to use it, since the browser empties the file field
    upload = io.BytesIO(EXECUTION_FORM.to_json().encode())
    upload.name = "exec.json"
    r = client.post(url, {"source": "upload", "file": upload, "intent": "preview"})
    page = r.content.decode()
    assert "under the editor below" in page
    assert selected_builtin(page) == [
        f"si2024@{SI2024_FORM.version}"
    ]  # the current form, not the upload


def test_an_uploaded_form_file_is_validated_naming_the_metric(client, owner, study):
    client.force_login(owner)
    url = reverse("studies:study_form", args=[study.slug])
    data = EXECUTION_FORM.to_dict() | {"key": "lab", "version": 1}
    data["metrics"][6]["anchors"]["9"] = "beyond the scale"
    upload = io.BytesIO(json.dumps(data).encode())
    upload.name = "lab.json"
    r = client.post(url, {"source": "upload", "file": upload, "intent": "use"})
    page = r.content.decode()
    assert r.status_code == 400
    assert (
        "lab.json: metric &#x27;code_quality&#x27; (metrics[7]): anchor level 9 is outside" in page
    )
    assert not ReviewForm.objects.filter(key="lab").exists()


def test_an_edited_copy_is_stored_as_a_new_version(client, owner, study):
    client.force_login(owner)
    url = reverse("studies:study_form", args=[study.slug])
    data = SI2024_FORM.to_dict() | {"key": "formed-form", "version": 1}
    data["metrics"] = data["metrics"][:2]
    r = client.post(url, {"source": "edit", "definition": json.dumps(data), "intent": "use"})
    assert r.status_code == 302
    study.refresh_from_db()
    assert study.form_definition().metric_keys == ["novelty", "feasibility"]
    # the next copy offered gets the next version
    page = client.get(url).content.decode()
    assert "&quot;version&quot;: 2" in page or '"version": 2' in page


def test_a_viewer_sees_the_form_but_cannot_change_it(client, study, django_user_model):
    viewer = django_user_model.objects.create_user("viewer-x")
    StudyMember.objects.create(study=study, user=viewer, role="viewer")
    client.force_login(viewer)
    url = reverse("studies:study_form", args=[study.slug])
    page = client.get(url).content.decode()
    assert "Novelty" in page and "Use this form" not in page
    r = client.post(url, {"source": "builtin", "builtin": "execution", "intent": "use"})
    assert r.status_code == 403


def test_the_form_is_immutable_once_the_study_has_reviews(client, owner, study):
    add_reviews(study)
    assert "its form can no longer change" in study_form_locked_reason(study)
    with pytest.raises(ValueError, match="can no longer change"):
        study_form_set(study=study, definition=EXECUTION_FORM)
    client.force_login(owner)
    url = reverse("studies:study_form", args=[study.slug])
    page = client.get(url).content.decode()
    assert "Locked" in page and "Use this form" not in page
    r = client.post(url, {"source": "builtin", "builtin": "execution", "intent": "use"})
    assert r.status_code == 400 and "can no longer change" in r.content.decode()
    study.refresh_from_db()
    assert study.review_form.key == "si2024"


def test_a_study_without_reviews_may_change_its_form_and_keeps_the_old_row(study):
    old = study.review_form
    study_form_set(study=study, definition=EXECUTION_FORM)
    study.refresh_from_db()
    assert study.review_form.key == "execution"
    assert ReviewForm.objects.get(pk=old.pk).as_definition() == SI2024_FORM
