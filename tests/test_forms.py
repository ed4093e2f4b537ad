"""Review forms in the database: resolving a name or file, versions, immutability."""

from __future__ import annotations

import json

import pytest

from studies.models import ReviewForm
from studies.protocol.forms import EXECUTION_FORM, SI2024_FORM, SI2024_V1_FORM, FormFileError
from studies.reviewer_forms import review_form_resolve
from studies.services.study import review_form_ensure, study_create


def test_resolve_returns_built_in_forms_by_name_and_version():
    assert review_form_resolve("si2024") == SI2024_FORM
    assert review_form_resolve("si2024@1") == SI2024_V1_FORM
    assert review_form_resolve("execution") == EXECUTION_FORM


@pytest.mark.django_db
def test_resolve_reads_and_validates_a_form_file(tmp_path):
    data = EXECUTION_FORM.to_dict() | {"key": "exec-lab", "title": "Our lab's form"}
    path = tmp_path / "lab.json"
    path.write_text(json.dumps(data))
    form = review_form_resolve(str(path))
    assert form.key == "exec-lab" and form.metric("code_quality").maximum == 5
    data["metrics"][0]["maximum"] = 0
    path.write_text(json.dumps(data))
    with pytest.raises(FormFileError, match=r"(?s)lab.json: .*metric 'novelty' \(metrics\[1\]\)"):
        review_form_resolve(path)


@pytest.mark.django_db
def test_resolve_names_the_built_ins_when_nothing_matches():
    with pytest.raises(FormFileError, match="no built-in or stored review form 'nope'.*execution"):
        review_form_resolve("nope")
    with pytest.raises(FormFileError, match="no such file"):
        review_form_resolve("missing/form.json")


@pytest.mark.django_db
def test_resolve_finds_a_form_stored_earlier_by_its_key(owner):
    custom = EXECUTION_FORM.to_dict() | {"key": "lab", "version": 3}
    from studies.protocol.forms import form_validate

    review_form_ensure(definition=form_validate(custom))
    assert review_form_resolve("lab").version == 3
    assert review_form_resolve("lab@3").key == "lab"


@pytest.mark.django_db
def test_new_studies_get_the_second_si2024_version_and_old_rows_keep_theirs(owner):
    old = review_form_ensure(definition=SI2024_V1_FORM)
    study = study_create(owner=owner, slug="fresh")
    assert (study.review_form.key, study.review_form.version) == (
        SI2024_FORM.key,
        SI2024_FORM.version,
    )
    assert ReviewForm.objects.get(pk=old.pk).as_definition() == SI2024_V1_FORM


@pytest.mark.django_db
def test_a_stored_form_version_cannot_be_redefined():
    review_form_ensure(definition=EXECUTION_FORM)
    changed = EXECUTION_FORM.to_dict()
    changed["metrics"][0]["anchors"]["1"] = "Something else"
    from studies.protocol.forms import form_validate

    with pytest.raises(ValueError, match="execution v1 already exists with a different definition"):
        review_form_ensure(definition=form_validate(changed))


@pytest.mark.django_db
def test_direct_scoring_asks_each_metric_of_the_study_form_on_its_own_scale(owner):
    from judging.services.drivers.score import ScoreDriver
    from studies.models import Idea, Topic

    study = study_create(owner=owner, slug="judged", form=EXECUTION_FORM)
    topic = Topic.objects.create(study=study, name="Coding")
    idea = Idea.objects.create(study=study, topic=topic, title="T", raw_text="An idea.")
    driver = ScoreDriver(run=None, ideas=[idea], params={"samples": 1, "text": "raw"}, study=study)
    assert driver.ranges == {m.key: (m.minimum, m.maximum) for m in EXECUTION_FORM.metrics}
    messages, _ = driver.messages(idea.pk)
    prompt = "\n".join(m["content"] for m in messages)
    assert "## code_quality (Code quality): integer from 1 to 5" in prompt
    assert "## soundness (Soundness): integer from 1 to 10" in prompt
    # sparse anchors: only the anchored levels are described
    assert "  3: Runs with effort; readable in parts." in prompt
    assert "  2: " not in prompt.split("## code_quality")[1]


@pytest.mark.django_db
def test_the_admin_shows_a_stored_form_read_only_and_validates_a_new_one(client):
    from django.contrib.auth import get_user_model

    admin_user = get_user_model().objects.create_superuser("root", password="root-pass-123")
    client.force_login(admin_user)
    stored = review_form_ensure(definition=EXECUTION_FORM)
    page = client.get(f"/admin/studies/reviewform/{stored.pk}/change/").content.decode()
    assert 'name="definition"' not in page and "code_quality" in page
    bad = EXECUTION_FORM.to_dict() | {"key": "admin-made", "version": 1}
    bad["metrics"][0]["maximum"] = 0
    r = client.post("/admin/studies/reviewform/add/", {"definition": json.dumps(bad)})
    assert r.status_code == 200 and "metric &#x27;novelty&#x27; (metrics[1])" in r.content.decode()
    good = EXECUTION_FORM.to_dict() | {"key": "admin-made", "version": 1}
    r = client.post("/admin/studies/reviewform/add/", {"definition": json.dumps(good)})
    assert r.status_code == 302
    assert ReviewForm.objects.get(key="admin-made").as_definition().metric_keys == (
        EXECUTION_FORM.metric_keys
    )


@pytest.mark.django_db
def test_study_form_command_shows_and_sets_the_form_until_reviews_exist(owner, tmp_path):
    import io

    from django.core.management import CommandError, call_command

    study_create(owner=owner, slug="cli")
    out = io.StringIO()
    call_command("study_form", "cli", "execution", stdout=out)
    text = out.getvalue()
    assert "Executed project review (execution v1)" in text
    assert "  code_quality: Code quality, 1–5, no rationale; anchored levels: 1, 3, 5" in text
    assert "  soundness: Soundness, 1–10, rationale ≥ 25 words" in text
    out = io.StringIO()
    call_command("study_form", "cli", "--json", stdout=out)
    assert json.loads(out.getvalue())["key"] == "execution"
    with pytest.raises(CommandError, match="no built-in or stored review form 'nope'"):
        call_command("study_form", "cli", "nope")


@pytest.mark.django_db
def test_pair_tasks_compare_on_the_forms_own_dimensions(owner):
    from studies.protocol.forms import form_validate
    from studies.services.reviews import pair_dimensions

    assert pair_dimensions(study_create(owner=owner, slug="p-exec", form=EXECUTION_FORM)) == [
        "overall",
        "novelty",
        "excitement",
        "effectiveness",
    ]
    own = form_validate(
        {
            "key": "quality-only",
            "version": 1,
            "title": "Q",
            "metrics": [
                {"key": "clarity", "label": "Clarity", "minimum": 1, "maximum": 5},
                {"key": "quality", "label": "Quality", "minimum": 1, "maximum": 7},
            ],
        }
    )
    assert pair_dimensions(study_create(owner=owner, slug="p-own", form=own)) == ["quality"]
    named = form_validate({**EXECUTION_FORM.to_dict(), "key": "exec-pairs", "pair_metrics": [
        "soundness", "faithfulness", "overall"]})  # fmt: skip
    assert named.to_dict()["pair_metrics"] == ["soundness", "faithfulness", "overall"]
    study = study_create(owner=owner, slug="p-named", form=named)
    assert pair_dimensions(study) == ["soundness", "faithfulness", "overall"]


def test_pair_metrics_must_be_the_forms_own_metrics():
    from studies.protocol.forms import FormFileError, form_validate

    data = {**EXECUTION_FORM.to_dict(), "key": "exec-pairs"}
    for pairs, problem in [
        (["soundness", "clarity"], "'pair_metrics': clarity is not a metric of this form"),
        (["overall", "overall"], "'pair_metrics' names a metric twice"),
        ("overall", "'pair_metrics' must be a list of metric keys"),
    ]:
        with pytest.raises(FormFileError) as raised:
            form_validate({**data, "pair_metrics": pairs})
        assert problem in str(raised.value)
    # A form without them writes none, so stored definitions keep their text.
    assert "pair_metrics" not in EXECUTION_FORM.to_dict()
