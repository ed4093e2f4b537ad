"""Every import page offers sample files that import as they are, and names its columns;
invitation files import their valid rows on request."""

from __future__ import annotations

import io
import json

import pytest
from django.core import mail
from django.urls import reverse

from studies import services
from studies.import_samples import idea_sample_rows, invitation_sample_rows
from studies.models import Condition, IdeaUpload, Topic
from studies.protocol.forms import EXECUTION_FORM
from studies.protocol.institutions import institution_keys
from studies.services.invitations import invitations_create_from_csv, invitations_read
from studies.services.study import study_create
from studies.services.transfer import reviews_import, reviews_parse


@pytest.fixture
def study(db, owner):
    study = study_create(owner=owner, slug="samples", title="Samples", form=EXECUTION_FORM)
    Topic.objects.create(study=study, name="Coding")
    Condition.objects.create(study=study, key="Human", kind="human")
    Condition.objects.create(study=study, key="AI", kind="ai")
    return study


def sample(client, study, kind, fmt):
    r = client.get(reverse("studies:import_sample", args=[study.slug, kind, fmt]))
    assert r.status_code == 200
    assert f"{study.slug}-{kind}-sample.{fmt}" in r["Content-Disposition"]
    return r.content


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_the_review_sample_follows_the_form_and_imports_as_it_is(client, owner, study, fmt):
    client.force_login(owner)
    data = sample(client, study, "reviews", fmt)
    text = data.decode()
    assert "code_quality" in text and "code_quality_rationale" not in text
    assert "soundness_rationale" in text
    parsed = reviews_parse(study=study, fmt="generic", reviews=data, reviews_name=f"s.{fmt}")
    summary = reviews_import(study=study, parsed=parsed, kind="generic")
    assert summary["created"]["reviews"] == len(parsed.reviews) > 0
    if fmt == "csv":
        import csv

        rows = list(csv.DictReader(io.StringIO(text)))
    else:
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    sent = sorted(float(row["code_quality"]) for row in rows)
    stored = sorted(
        s.score for r in study.reviews.all() for s in r.scores.filter(metric="code_quality")
    )
    assert stored == sent and all(1 <= v <= 5 for v in stored)


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_the_idea_sample_names_the_id_column_and_imports_as_it_is(client, owner, study, fmt):
    client.force_login(owner)
    data = sample(client, study, "ideas", fmt)
    assert b"external_id" in data
    batch = services.ideas_read_file(study=study, name=f"ideas.{fmt}", data=data)
    assert batch.ok and len(batch.records) == 2, batch.problems
    assert all(len(r.parsed.sections) == 7 for r in batch.records)


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_the_invitation_sample_reads_as_two_valid_rows(client, owner, study, fmt):
    client.force_login(owner)
    data = sample(client, study, "invitations", fmt)
    rows, problems = invitations_read(study=study, data=data, name=f"people.{fmt}")
    assert [r.email for r in rows] == ["ada@example.org", "reviewer@example.org"]
    assert not problems


def test_each_import_page_links_its_samples_and_names_its_required_columns(client, owner, study):
    client.force_login(owner)
    pages = {
        "studies:reviews_import_page": (
            "reviews",
            ["idea_id", "condition", "topic", "code_quality"],
        ),
        "studies:ideas_import": ("ideas", ["external_id", "topic", "condition", "text"]),
        "studies:study_invitations": ("invitations", ["email"]),
    }
    for name, (kind, columns) in pages.items():
        page = client.get(reverse(name, args=[study.slug])).content.decode()
        for fmt in ("csv", "jsonl"):
            assert reverse("studies:import_sample", args=[study.slug, kind, fmt]) in page, name
        for col in columns:
            assert f"<code>{col}</code>" in page, (name, col)


def test_an_unknown_sample_is_not_found(client, owner, study):
    client.force_login(owner)
    assert client.get(f"/studies/{study.slug}/samples/secrets.csv").status_code == 404
    assert client.get(f"/studies/{study.slug}/samples/reviews.xlsx").status_code == 404


def test_invitations_with_bad_rows_invite_only_the_valid_ones_on_request(owner, study):
    data = b"name,email\nAda,ada@example.org\nBo,not-an-email\nCy,cy@example.org\nAda,ada@example.org\n"
    created, problems = invitations_create_from_csv(study=study, data=data)
    assert created == [] and study.invitations.count() == 0
    assert problems == [
        "row 2: not-an-email is not an email address",
        "row 4: ada@example.org appears twice",
    ]
    created, problems = invitations_create_from_csv(study=study, data=data, valid_only=True)
    assert sorted(i.email for i in created) == ["ada@example.org", "cy@example.org"]
    assert len(problems) == 2 and len(mail.outbox) == 2
    # a second upload of the same file names the rows already invited
    _, again = invitations_read(study=study, data=data)
    assert "row 1: ada@example.org already has an invitation to this study" in again


def test_the_invitation_page_offers_to_invite_the_valid_rows(client, owner, study):
    client.force_login(owner)
    url = reverse("studies:invitations_upload", args=[study.slug])
    upload = io.BytesIO(b"Ada,ada@example.org\nBo,broken\n")
    upload.name = "people.csv"
    r = client.post(url, {"file": upload})
    page = r.content.decode()
    assert r.status_code == 400
    assert "row 2: broken is not an email address" in page
    assert "Invite the 1 valid row of people.csv" in page
    assert study.invitations.count() == 0
    # the file is kept on the server, as an idea file is, and the page names it by id
    staged = page.split('name="staged" value="')[1].split('"')[0]
    kept = IdeaUpload.objects.get(study=study)
    assert str(kept.pk) == staged and bytes(kept.data) == upload.getvalue()
    r = client.post(url, {"staged": staged, "valid_only": "on"})
    assert r.status_code == 302
    assert list(study.invitations.values_list("email", flat=True)) == ["ada@example.org"]
    page = client.get(reverse("studies:study_invitations", args=[study.slug])).content.decode()
    assert "1 invitation sent." in page and "row 2: broken is not an email address" in page
    # once its rows are taken the kept file is gone: sending its id again invites no one
    assert not IdeaUpload.objects.exists()
    r = client.post(url, {"staged": staged, "valid_only": "on"})
    assert r.status_code == 400 and "no longer kept" in r.content.decode()
    assert study.invitations.count() == 1 and len(mail.outbox) == 1


def test_a_jsonl_invitation_file_with_a_bad_line_names_it(owner, study):
    data = b'{"name": "Ada", "email": "ada@example.org"}\n[1, 2]\n'
    rows, problems = invitations_read(study=study, data=data, name="people.jsonl")
    assert rows == [] and problems == [
        "people.jsonl, row 2: each line must be a JSON object with name and email"
    ]
    data = json.dumps({"email": "x@example.org"}).encode()
    rows, _ = invitations_read(study=study, data=data, name="people.jsonl")
    assert rows[0].email == "x@example.org" and rows[0].name == ""


def test_reviewers_invited_from_the_sample_can_review_the_sample_ideas():
    """The two samples are tried together: an author institution shared with the
    invitations' addresses would keep every sample reviewer off every sample idea."""
    ideas = idea_sample_rows(conditions=["Human", "AI"], topics=["Math"])
    authors = institution_keys(
        [row["institution"] for row in ideas], [row["author_contact"] for row in ideas]
    )
    assert authors  # the sample does name its authors' institution
    for person in invitation_sample_rows():
        assert not institution_keys(emails=[person["email"]]) & authors, person
