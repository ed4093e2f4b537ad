"""Idea intake from the web and the command line: per-row problems, nothing written from
a bad batch unless the owner imports the valid rows, and in-place section fixes."""

from __future__ import annotations

import io
import zipfile

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from studies.models import AuditEvent, Condition, Idea, IdeaCondition, IdeaUpload, ImportBatch
from studies.services.study import study_create

FULL = """## Title
{title}

## Problem Statement
Models state false facts.

## Motivation
Retrieval helps but is slow.

## Proposed Method
Ask GPT-4 to verify each claim with 3 sources.

## Experiment Plan
Run on TruthfulQA with 817 questions.

## Test Cases
Input: who wrote Hamlet? Output: Shakespeare.

## Fallback Plan
Analyse the failures.
"""


def csv_bytes(rows: list[list[str]]) -> bytes:
    out = io.StringIO()
    import csv

    writer = csv.writer(out)
    writer.writerow(["id", "title", "topic", "condition", "text", "institution"])
    writer.writerows(rows)
    return out.getvalue().encode()


@pytest.fixture
def study(db, owner):
    study = study_create(owner=owner, slug="prep", title="Prep study")
    from studies.models import Topic

    Topic.objects.create(study=study, name="Factuality")
    Topic.objects.create(study=study, name="Coding")
    Condition.objects.create(study=study, key="Human", kind=Condition.Kind.HUMAN)
    Condition.objects.create(study=study, key="AI", kind=Condition.Kind.AI)
    return study


@pytest.fixture
def owner_client(owner) -> Client:
    c = Client()
    c.force_login(owner)
    return c


def upload(client: Client, name: str, data: bytes, **extra: str):
    f = io.BytesIO(data)
    f.name = name
    return client.post(
        reverse("studies:ideas_import", args=["prep"]), {"form": "upload", "file": f, **extra}
    )


BAD_BATCH = [
    ["h1", "Good idea", "Factuality", "Human", FULL.format(title="Good idea"), "Uni A"],
    ["h2", "Lost topic", "Astrology", "Human", FULL.format(title="Lost topic"), ""],
    ["h1", "Same id", "Coding", "AI", FULL.format(title="Same id"), ""],
    ["a3", "Nothing", "Coding", "AI", "", ""],
    ["a4", "Bad condition", "Coding", "Robot", FULL.format(title="x"), ""],
]


def test_a_bad_upload_reports_every_row_and_field_and_writes_nothing(study, owner_client):
    response = upload(owner_client, "ideas.csv", csv_bytes(BAD_BATCH))
    assert response.status_code == 400
    body = response.content.decode()
    assert "4 problems: nothing was imported" in body
    assert "ideas.csv, row 3" in body and "unknown topic &#x27;Astrology&#x27;" in body
    assert "ideas.csv, row 4" in body and "duplicate external id &#x27;h1&#x27;" in body
    assert "ideas.csv, row 5" in body and "empty proposal" in body
    assert "ideas.csv, row 6" in body and "unknown condition &#x27;Robot&#x27;" in body
    assert "Import the 1 valid row of" in body
    assert Idea.objects.count() == 0 and IdeaCondition.objects.count() == 0
    assert not ImportBatch.objects.filter(kind="ideas").exists()


def test_a_file_that_is_not_utf8_is_refused_whole(study, owner_client):
    data = csv_bytes(BAD_BATCH[:1]).replace(b"Good idea", b"Caf\xe9 idea")
    response = upload(owner_client, "latin1.csv", data)
    assert response.status_code == 400
    assert "not UTF-8 text" in response.content.decode()
    assert "Import the 0 valid" not in response.content.decode()
    assert "No row of this file can be imported" in response.content.decode()
    assert Idea.objects.count() == 0


def test_the_owner_can_import_the_valid_rows_of_a_bad_batch(study, owner, owner_client):
    upload(owner_client, "ideas.csv", csv_bytes(BAD_BATCH))
    staged = IdeaUpload.objects.get(study=study)
    response = owner_client.post(
        reverse("studies:ideas_import", args=["prep"]),
        {"form": "upload", "staged": staged.pk, "import_valid_rows": "on"},
    )
    assert response.status_code == 302
    idea = Idea.objects.get()
    assert idea.title == "Good idea" and idea.author_institution == "Uni A"
    assert idea.memberships.get().external_id == "h1"
    assert idea.section_status()["missing"] == [] and idea.word_count() > 40
    batch = ImportBatch.objects.get(kind="ideas")
    assert batch.summary["ideas"] == 1 and batch.summary["skipped_rows"] == 4
    assert AuditEvent.objects.filter(verb="ideas_imported", actor=owner).exists()
    assert not IdeaUpload.objects.exists()
    study.refresh_from_db()
    assert study.status == "preparing"


def test_a_kept_file_of_another_study_is_not_imported(study, owner, owner_client):
    from studies.services.study import study_create

    other = study_create(owner=owner, slug="other", baseline_condition="Human")
    upload(owner_client, "ideas.csv", csv_bytes(BAD_BATCH))
    kept = IdeaUpload.objects.get(study=study)
    IdeaUpload.objects.filter(pk=kept.pk).update(study=other)
    response = owner_client.post(
        reverse("studies:ideas_import", args=["prep"]),
        {"form": "upload", "staged": kept.pk, "import_valid_rows": "on"},
        follow=True,
    )
    assert "no longer kept" in response.content.decode()
    assert Idea.objects.count() == 0 and IdeaUpload.objects.filter(study=other).exists()


def test_a_zip_of_markdown_with_front_matter_imports_in_one_go(study, owner_client):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for n, cond in enumerate(["Human", "AI; Human"]):
            z.writestr(
                f"ideas/idea{n}.md",
                f"---\ntopic: coding\ncondition: {cond}\n---\n" + FULL.format(title=f"Zip {n}"),
            )
    response = upload(owner_client, "batch.zip", buf.getvalue())
    assert response.status_code == 302
    ideas = list(Idea.objects.order_by("pk"))
    assert [i.title for i in ideas] == ["Zip 0", "Zip 1"]
    assert ideas[1].memberships.count() == 2  # one idea in two conditions
    assert {i.topic.name for i in ideas} == {"Coding"}


def test_a_pasted_proposal_is_split_into_sections(study, owner_client):
    text = "**Title:** Pasted\n**Problem Statement:** P.\n3. Motivation\nM.\nFallback Plan: F."
    response = owner_client.post(
        reverse("studies:ideas_import", args=["prep"]),
        {
            "form": "paste",
            "external_id": "p1",
            "topic": "Coding",
            "conditions": ["AI"],
            "text": text,
        },
    )
    assert response.status_code == 302
    idea = Idea.objects.get()
    status = idea.section_status()
    assert status["found"] == ["title", "problem_statement", "motivation", "fallback_plan"]
    assert "proposed_method" in status["missing"]


def test_the_list_shows_missing_sections_and_the_owner_fixes_them_in_place(study, owner_client):
    owner_client.post(
        reverse("studies:ideas_import", args=["prep"]),
        {
            "form": "paste",
            "external_id": "p1",
            "topic": "Coding",
            "conditions": ["AI"],
            "text": "# Title\nShort\n# Motivation\nBecause.",
        },
    )
    idea = Idea.objects.get()
    page = owner_client.get(reverse("studies:ideas_list", args=["prep"])).content.decode()
    assert "2/7 found" in page and "missing: Fallback Plan" in page
    url = reverse("studies:idea_sections", args=["prep", idea.pk])
    assert f'href="{url}" hx-get="{url}"' in page
    # htmx: the edit row replaces the row; a plain GET is a full page
    partial = owner_client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in partial and 'name="fallback_plan"' in partial
    assert "<html" in owner_client.get(url).content.decode()
    data = {k: f"Text for {k}." for k in FULL_KEYS}
    row = owner_client.post(url, data, HTTP_HX_REQUEST="true").content.decode()
    assert "7/7 found" in row and "<html" not in row
    idea.refresh_from_db()
    assert idea.raw_text.startswith("## 1. Title\n\nText for title.")
    assert AuditEvent.objects.filter(verb="idea_sections_edited").exists()


def test_the_sections_form_of_an_idea_with_a_title_and_no_sections_starts_from_its_title(
    study, owner_client
):
    """Ideas imported with their reviews have a title and no text; fixing their sections
    must not lose the title the list shows."""
    topic = study.topics.get(name="Coding")
    idea = Idea.objects.create(study=study, topic=topic, title="Diachronic navigation")
    url = reverse("studies:idea_sections", args=["prep", idea.pk])
    form = owner_client.get(url).content.decode()
    assert 'name="title"' in form and "Diachronic navigation" in form.split('name="title"')[1][:200]
    data = {k: "" for k in FULL_KEYS} | {"title": "Diachronic navigation", "motivation": "Why."}
    owner_client.post(url, data)
    idea.refresh_from_db()
    assert idea.title == "Diachronic navigation"
    assert idea.raw_text.startswith("## 1. Title\n\nDiachronic navigation")


FULL_KEYS = [
    "title",
    "problem_statement",
    "motivation",
    "proposed_method",
    "experiment_plan",
    "test_cases",
    "fallback_plan",
]


def test_another_researcher_gets_404_on_every_idea_page(study, other_researcher):
    c = Client()
    c.force_login(other_researcher)
    idea = Idea.objects.create(study=study, topic=study.topics.first(), raw_text="x")
    for name in [
        "ideas_list",
        "ideas_import",
        "topic_matching",
        "duplicates",
        "normalization",
        "leakage",
    ]:
        assert c.get(reverse(f"studies:{name}", args=["prep"])).status_code == 404, name
    for name in ["idea_sections", "idea_signoff", "idea_row"]:
        assert c.get(reverse(f"studies:{name}", args=["prep", idea.pk])).status_code == 404, name
    assert upload(c, "ideas.csv", csv_bytes(BAD_BATCH[:1])).status_code == 404
    assert Idea.objects.count() == 1


def test_import_ideas_command_refuses_a_bad_folder_unless_told_to_import_valid_rows(
    study, tmp_path
):
    (tmp_path / "good.md").write_text(
        "---\ntopic: Factuality\ncondition: Human\n---\n" + FULL.format(title="Good")
    )
    (tmp_path / "bad.md").write_text("---\ntopic: Nowhere\ncondition: Human\n---\nText.")
    (tmp_path / "latin.md").write_bytes(b"---\ntopic: Coding\ncondition: AI\n---\nCaf\xe9")
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(CommandError, match="nothing was imported"):
        call_command("import_ideas", "prep", str(tmp_path), stdout=out, stderr=err)
    assert "bad.md: unknown topic 'Nowhere'" in err.getvalue()
    assert "latin.md: not UTF-8" in err.getvalue()
    assert Idea.objects.count() == 0
    call_command(
        "import_ideas", "prep", str(tmp_path), "--import-valid-rows", stdout=out, stderr=err
    )
    assert list(Idea.objects.values_list("title", flat=True)) == ["Good"]
    assert "imported 1 idea into prep, skipped 2 rows" in out.getvalue()


def test_import_ideas_command_creates_topics_and_conditions_it_is_given(db, owner, tmp_path):
    study_create(owner=owner, slug="fresh")
    path = tmp_path / "ideas.jsonl"
    path.write_text(
        '{"id": "x1", "topic": "Math", "conditions": ["AI"], "text": "# Title\\nT\\n'
        '# Problem Statement\\nP"}\n'
    )
    call_command(
        "import_ideas", "fresh", str(path), "--topic", "Math", "--condition", "AI:ai",
        stdout=io.StringIO(),
    )  # fmt: skip
    idea = Idea.objects.get()
    assert idea.topic.name == "Math" and idea.memberships.get().condition.kind == "ai"


@pytest.mark.django_db
def test_the_study_page_shows_an_idea_import_summary(study, owner_client):
    upload(owner_client, "ideas.csv", csv_bytes([BAD_BATCH[0]]))
    page = owner_client.get(reverse("studies:study_detail", args=["prep"]))
    assert page.status_code == 200
    assert "ideas imported: 1" in page.content.decode()


@pytest.mark.django_db
def test_an_oversized_idea_names_the_idea_and_the_limit_and_the_rest_still_reads(
    study, owner_client
):
    huge = FULL.format(title="Huge") + "word " * 40_000
    rows = [
        ["big1", "Huge", "Factuality", "Human", huge, ""],
        ["ok1", "Fine", "Coding", "AI", FULL.format(title="Fine"), ""],
    ]
    response = upload(owner_client, "ideas.csv", csv_bytes(rows))
    page = response.content.decode()
    assert response.status_code == 400
    assert "idea &#x27;big1&#x27; is 200," in page and "limit of 60,000 per idea" in page
    assert "field larger than field limit" not in page
    assert "Import the 1 valid row of ideas.csv" in page


@pytest.mark.django_db
def test_a_duplicate_topic_or_condition_says_so_and_adds_nothing(study, owner_client):
    url = reverse("studies:ideas_import", args=["prep"])
    response = owner_client.post(url, {"form": "topic", "name": "factuality"})
    assert response.status_code == 400
    assert "already has the topic" in response.content.decode()
    assert study.topics.count() == 2
    response = owner_client.post(url, {"form": "condition", "key": "ai", "kind": "ai"})
    assert response.status_code == 400
    assert "already has the condition" in response.content.decode()
    assert study.conditions.count() == 2


@pytest.mark.django_db
def test_adding_a_topic_or_condition_confirms_it(study, owner_client):
    url = reverse("studies:ideas_import", args=["prep"])
    page = owner_client.post(url, {"form": "topic", "name": "Safety"}, follow=True)
    assert "Topic &#x27;Safety&#x27; added." in page.content.decode()
    page = owner_client.post(url, {"form": "condition", "key": "Rerank", "kind": "ai"}, follow=True)
    assert "Condition &#x27;Rerank&#x27; (AI) added." in page.content.decode()


def test_an_editor_names_a_conditions_generating_model_and_a_viewer_may_not(
    study, owner, owner_client
):
    from django.contrib.auth import get_user_model

    from studies.models import StudyMember

    url = f"/studies/{study.slug}/ideas/import/"
    r = owner_client.post(url, {"form": "model", "condition": "AI", "generating_model": " gpt-4o "})
    assert r.status_code == 302
    assert Condition.objects.get(study=study, key="AI").generating_model == "gpt-4o"
    assert "gpt-4o" in owner_client.get(url).content.decode()
    bad = owner_client.post(url, {"form": "model", "condition": "Nope", "generating_model": "x"})
    assert bad.status_code == 400
    viewer = get_user_model().objects.create_user("v@example.org", password="pw-Viewer-123")
    StudyMember.objects.create(study=study, user=viewer, role=StudyMember.Role.VIEWER)
    c = Client()
    c.force_login(viewer)
    assert "gpt-4o" in c.get(f"/studies/{study.slug}/").content.decode()
    refused = c.post(url, {"form": "model", "condition": "AI", "generating_model": "claude-3"})
    assert refused.status_code == 403
    assert Condition.objects.get(study=study, key="AI").generating_model == "gpt-4o"
    r = owner_client.post(url, {"form": "model", "condition": "AI", "generating_model": ""})
    assert Condition.objects.get(study=study, key="AI").generating_model == ""
