"""Importing review files: cleaning, flagging, idempotence and atomic refusal."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.core.management import CommandError, call_command

from studies.models import (
    AuditEvent,
    Condition,
    Idea,
    IdeaCondition,
    ImportBatch,
    Review,
    ReviewScore,
    Study,
    Topic,
)
from tests.conftest import METRICS, SI_REVIEWS, SI_TITLES

MODELS = [
    Study,
    Topic,
    Condition,
    Idea,
    IdeaCondition,
    Review,
    ReviewScore,
    ImportBatch,
    AuditEvent,
]


def db_state() -> dict[str, int]:
    return {m.__name__: m.objects.count() for m in MODELS}


def run_import(*args: str) -> str:
    out = io.StringIO()
    call_command("import_reviews", *args, stdout=out)
    return out.getvalue()


def si_args(reviews=SI_REVIEWS, study="si2024"):
    return [
        "--format",
        "si2024",
        "--reviews",
        str(reviews),
        "--titles",
        str(SI_TITLES),
        "--study",
        study,
    ]


@pytest.mark.django_db
def test_si2024_import_cleans_flags_and_summarises(owner):
    out = run_import(*si_args(), "--owner", "owner")
    study = Study.objects.get(slug="si2024")
    assert study.reviews.count() == 296
    assert study.ideas.count() == 129
    assert IdeaCondition.objects.filter(study=study).count() == 147
    assert sorted(study.conditions.values_list("key", "kind")) == [
        ("AI", "ai"),
        ("AI_Rerank", "ai"),
        ("Human", "human"),
    ]
    assert study.topics.count() == 7
    # idea ids with stray spaces are trimmed, and the raw ones all resolve
    assert IdeaCondition.objects.filter(external_id="Bias_1_AI_Rerank").exists()
    assert not IdeaCondition.objects.filter(external_id__contains=" ").exists()
    # minutes: parsed value beside the raw text
    r = Review.objects.get(study=study, minutes_raw="15 minutes.")
    assert r.minutes == 15.0
    r = Review.objects.filter(study=study, minutes_raw="35-40").first()
    assert r is not None and r.minutes == 37.5
    # familiarity as a long string keeps the text, gives the level
    r = Review.objects.filter(study=study, familiarity_raw__startswith="3 (").first()
    assert r is not None and r.familiarity == 3
    # consent and pledge problems are flagged, not dropped
    flagged = Review.objects.filter(study=study).exclude(flags=[])
    flags = sorted(f for r in flagged for f in r.flags)
    assert flags == ["ai_pledge_declined", "ai_pledge_declined", "no_consent"]
    assert "rows: 337" in out and "unique reviews: 296" in out
    assert "rows flagged (kept, marked): 2" in out
    assert "idea_id: spaces removed: 15" in out
    # an AI idea also selected into AI_Rerank is one idea in two conditions
    twin = IdeaCondition.objects.get(study=study, external_id="Coding_8_AI_Rerank").idea
    assert sorted(twin.memberships.values_list("external_id", flat=True)) == [
        "Coding_6_AI",
        "Coding_8_AI_Rerank",
    ]
    assert twin.reviews.count() == 3


@pytest.mark.django_db
def test_reimporting_the_same_file_changes_nothing(owner):
    run_import(*si_args(), "--owner", "owner")
    before = db_state()
    out = run_import(*si_args())
    assert db_state() == before
    assert "nothing changed" in out


@pytest.mark.django_db
def test_database_frame_equals_an_independent_reading_of_the_file(si2024_study):
    from studies.selectors import review_frame
    from tests.analysis.conftest import load_si2024_frame

    ours = review_frame(si2024_study)
    ref = load_si2024_frame()
    key = ["source_idea_id", "condition", "topic", *METRICS, "confidence", "familiarity"]
    a = ours[key].sort_values(key).reset_index(drop=True)
    b = ref[key].sort_values(key).reset_index(drop=True)
    assert len(a) == 337
    assert (a.to_numpy() == b.to_numpy()).all()
    assert ours["idea_id"].nunique() == ref["idea_id"].nunique() == 129
    assert ours["review_id"].nunique() == 296
    assert ours["reviewer_id"].isna().all()


def _write(tmp_path, name, content):
    p = tmp_path / name
    p.write_bytes(content if isinstance(content, bytes) else content.encode())
    return p


def _si_rows_with(tmp_path, changes, name="bad.json"):
    data = json.loads(SI_REVIEWS.read_text())
    for (col, i), value in changes.items():
        data[col][i] = value
    return _write(tmp_path, name, json.dumps(data))


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda t: _write(t, "x.json", "{not json"), "x.json: not valid JSON"),
        (lambda t: _write(t, "empty.json", ""), "empty.json: the file is empty"),
        (
            lambda t: _write(
                t, "nocol.json", json.dumps({"idea_id": ["a"], "condition": ["Human"]})
            ),
            "nocol.json, field 'timestamp': missing column",
        ),
        (
            lambda t: _si_rows_with(t, {("novelty_score", 11): "11"}),
            "bad.json, row 12, field 'novelty_score': score '11' is outside the form's range 1–10",
        ),
        (
            lambda t: _si_rows_with(t, {("overall_score", 0): "great"}),
            "bad.json, row 1, field 'overall_score': score 'great' is not a number",
        ),
        (
            lambda t: _si_rows_with(t, {("condition", 4): "Crowd"}),
            "bad.json, row 5, field 'condition': unknown condition 'Crowd'",
        ),
    ],
    ids=[
        "not-json",
        "empty",
        "missing-column",
        "score-out-of-range",
        "score-not-a-number",
        "unknown-condition",
    ],
)
def test_bad_files_are_refused_with_row_and_field_and_nothing_is_written(
    tmp_path, owner, make, expected
):
    run_import(*si_args(), "--owner", "owner")  # an existing study must stay exactly as it is
    before = db_state()
    path = make(tmp_path)
    with pytest.raises(CommandError) as exc:
        run_import(*si_args(reviews=path))
    assert expected in str(exc.value)
    assert "nothing was written" in str(exc.value)
    assert db_state() == before


@pytest.mark.django_db
def test_a_refused_file_does_not_leave_a_new_study_behind(tmp_path, owner):
    before = db_state()
    path = _write(tmp_path, "x.json", "[1, 2")
    with pytest.raises(CommandError):
        run_import(*si_args(reviews=path, study="fresh"), "--owner", "owner")
    assert db_state() == before


def _generic_csv(tmp_path, rows, header=None):
    header = header or [
        "paper",
        "arm",
        "area",
        "who",
        *[f"{m}_score" for m in METRICS],
        "novelty_rationale",
        "minutes",
    ]
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(header)
    w.writerows(rows)
    return _write(tmp_path, "generic.csv", buf.getvalue())


@pytest.mark.django_db
def test_generic_csv_with_a_column_mapping_imports_reviewers_and_conditions(tmp_path, owner):
    rows = [
        ["p1", "Expert", "NLP", "alice", 5, 6, 7, 5, 6, "Some words here.", "20 min"],
        ["p1", "Expert", "NLP", "bob", 4, 4, 7, 5, 5, "", "1 hour"],
        ["p2", "Agent", "NLP", "alice", 7, 7, 5, 6, 6, "Novel.", "15"],
        ["p2", "Agent", "NLP", "bob", 6, 6, 6, 6, 6, "", ""],
    ]
    path = _generic_csv(tmp_path, rows)
    out = run_import(
        "--format", "generic", "--reviews", str(path), "--study", "g", "--owner", "owner",
        "--map", "idea_id=paper", "--map", "condition=arm", "--map", "topic=area",
        "--map", "reviewer_id=who", "--human-conditions", "Expert", "--baseline", "Expert",
    )  # fmt: skip
    study = Study.objects.get(slug="g")
    assert dict(study.conditions.values_list("key", "kind")) == {"Expert": "human", "Agent": "ai"}
    assert study.reviewers.count() == 2
    # reviewers get pseudonyms; their names are not stored as pseudonyms
    assert set(study.reviewers.values_list("pseudonym", flat=True)) == {"R001", "R002"}
    assert Review.objects.get(study=study, minutes_raw="1 hour").minutes == 60
    assert "reviewers: 2" in out
    from studies.selectors import review_frame

    df = review_frame(study)
    assert set(df["reviewer_id"]) == {"R001", "R002"}
    assert df.loc[df["condition"] == "Agent", "novelty"].mean() == 6.5


@pytest.mark.django_db
def test_generic_import_reports_every_bad_row_and_writes_nothing(tmp_path, owner):
    rows = [
        ["p1", "Expert", "NLP", "alice", 5, 6, 7, 5, 6, "", ""],
        ["p2", "Agent", "NLP", "alice", 0, 6, 7, 5, 6, "", ""],
        ["", "Agent", "NLP", "bob", 5, 6, 7, 5, 6, "", ""],
    ]
    path = _generic_csv(tmp_path, rows)
    before = db_state()
    with pytest.raises(CommandError) as exc:
        run_import(
            "--format", "generic", "--reviews", str(path), "--study", "g", "--owner", "owner",
            "--map", "idea_id=paper", "--map", "condition=arm", "--map", "topic=area",
        )  # fmt: skip
    msg = str(exc.value)
    assert (
        "generic.csv, row 2, field 'novelty_score': score '0' is outside the form's range 1–10"
        in msg
    )
    assert "generic.csv, row 3, field 'idea_id': empty idea id" in msg
    assert db_state() == before


@pytest.mark.django_db
def test_generic_import_names_a_missing_metric_column(tmp_path, owner):
    path = _generic_csv(
        tmp_path,
        [["p1", "H", "T", "a", 1, 2, 3, 4]],
        header=[
            "idea_id",
            "condition",
            "topic",
            "reviewer_id",
            "novelty",
            "excitement",
            "feasibility",
            "effectiveness",
        ],
    )
    with pytest.raises(CommandError) as exc:
        run_import(
            "--format", "generic", "--reviews", str(path), "--study", "g", "--owner", "owner"
        )
    assert "field 'overall': missing column" in str(exc.value)
    assert not Study.objects.filter(slug="g").exists()
