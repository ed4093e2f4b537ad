"""Bad input gets a clear answer, never a 500: formula cells in CSV exports, control
characters in typed text, oversized requests, deeply nested JSON. Fuzzed with hypothesis."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pandas as pd
import pytest
from django.test import Client
from django.urls import reverse
from hypothesis import HealthCheck, example, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from studies import csvsafe
from studies.protocol import jsonsafe
from studies.protocol.textcheck import control_character_problem
from tests.factories import review_answers, review_study

ROOT = Path(__file__).resolve().parents[1]
FORMULA = ("=", "+", "-", "@", "\t", "\r")


def _read_back(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


# --------------------------------------------------------------------------- CSV


@given(st.text())
@example('=HYPERLINK("http://evil","x")')
@example("-2+3+cmd|' /C calc'!A0")
@example("@SUM(A1)")
@example("\t=1")
@example("\r")
def test_no_written_text_cell_starts_a_formula_and_nothing_is_lost(text):
    out = io.StringIO()
    csvsafe.writer(out).writerow([text, 1])
    # csv.reader cannot give back a lone "" or "\r" cell; for those, check the written cell.
    blank = text in ("", "\r")
    (cell, number) = _read_back(out.getvalue())[0] if not blank else (csvsafe.safe_cell(text), "1")
    if cell.startswith(FORMULA):
        assert re.fullmatch(r"[+-][0-9.eE+-]+", cell), cell  # only numbers stay as they are
    if cell != text:
        assert cell == "'" + text
    assert number == "1"


@pytest.mark.parametrize("number", ["-3", "-2.5", "+4", "-1e-3", "-.5", "-0"])
def test_negative_and_signed_numbers_stay_numbers(number):
    assert csvsafe.safe_cell(number) == number
    frame = pd.DataFrame({"text": [number], "value": [float(number)]})
    assert csvsafe.frame_to_csv(frame, index=False) == frame.to_csv(index=False)


def test_numeric_tables_are_written_exactly_as_pandas_writes_them():
    frame = pd.DataFrame({"effect": [-0.25, 1.5], "n": [-3, 4], "ok": [True, False]})
    assert csvsafe.frame_to_csv(frame, index=False) == frame.to_csv(index=False)


def test_text_columns_headers_and_dict_rows_are_neutralised():
    frame = pd.DataFrame({"=topic": ["=cmd|' /C calc'!A0", "Bias"], "mean": [-1.0, 2.0]})
    rows = _read_back(csvsafe.frame_to_csv(frame, index=False))
    assert rows == [["'=topic", "mean"], ["'=cmd|' /C calc'!A0", "-1.0"], ["Bias", "2.0"]]
    out = io.StringIO()
    w = csvsafe.dict_writer(out, fieldnames=["rationale", "score"])
    w.writeheader()
    w.writerow({"rationale": "@SUM(1+1)*cmd", "score": -2})
    w.writerows([{"rationale": "+1+1", "score": "-2.5"}])
    assert _read_back(out.getvalue())[1:] == [["'@SUM(1+1)*cmd", "-2"], ["'+1+1", "-2.5"]]


def test_the_review_package_neutralises_what_reviewers_typed():
    from studies.package import _csv

    text = _csv([{"rationale": "=1+2", "score": 7}], ["rationale", "score"])
    assert _read_back(text)[1] == ["'=1+2", "7"]


# Files read back by a program, never opened in a spreadsheet: R's input for the lme4
# cross-check must carry the values unchanged.
CSV_EXEMPT = {"studies/analysis/rcheck.py": "the data file R reads for the lme4 cross-check"}
CSV_WRITERS = re.compile(r"csv\.writer\(|csv\.DictWriter\(|\.to_csv\(")


def test_every_module_writes_csv_through_the_one_safe_writer():
    offenders = []
    for package in ("ideareview", "llm", "accounts", "studies", "judging", "bench", "scripts"):
        for path in (ROOT / package).rglob("*.py"):
            name = str(path.relative_to(ROOT))
            if name in CSV_EXEMPT or name == "studies/csvsafe.py":
                continue
            for n, line in enumerate(path.read_text().splitlines(), start=1):
                if CSV_WRITERS.search(line):
                    offenders.append(f"{name}:{n}: {line.strip()}")
    assert offenders == []


# --------------------------------------------------------------------------- control characters


@given(st.text())
def test_control_characters_are_found_and_ordinary_typing_passes(text):
    problem = control_character_problem(text)
    bad = [c for c in text if (ord(c) < 32 and c not in "\t\n\r") or 0x7F <= ord(c) <= 0x9F]
    assert (problem is None) == (not bad)
    if bad:
        assert f"U+{ord(bad[0]):04X}" in problem


@pytest.fixture
def in_review(db, owner, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    return review_study(owner, n_reviewers=1, n_ideas=2, per_reviewer=1)


@pytest.mark.parametrize("bad", ["\x00", "\x01", "\x1b[2J", "\x7f", "\x9b"])
def test_a_control_character_in_autosave_is_a_field_error(in_review, bad):
    from studies.models import Review

    (assignment,) = in_review.assignments[in_review.reviewers[0].pk]
    client = Client()
    client.force_login(in_review.users[0])
    url = reverse("studies:review_autosave", args=[assignment.pk])
    data = {"novelty": "7", "novelty_rationale": f"fine words {bad} and more", "version": "0"}
    response = client.post(url, data, headers={"HX-Request": "true"})
    assert response.status_code == 400
    assert "Novelty rationale" in response.content.decode()
    assert "control character" in response.content.decode()
    assert not Review.objects.filter(assignment=assignment).exclude(draft={}).exists()


@pytest.mark.parametrize("bad", ["\x00", "\x08", "\x85"])
def test_a_control_character_on_submit_is_a_field_error(in_review, bad):
    from studies.models import Review

    (assignment,) = in_review.assignments[in_review.reviewers[0].pk]
    client = Client()
    client.force_login(in_review.users[0])
    data = review_answers(in_review.study)
    data["novelty_rationale"] = "a" + bad + data["novelty_rationale"]  # not at an end: stripped
    response = client.post(reverse("studies:review_submit", args=[assignment.pk]), data)
    assert response.status_code == 400
    assert "control character" in response.content.decode()
    assert not Review.objects.filter(assignment=assignment, status="submitted").exists()
    # the same answers without it are accepted
    data["novelty_rationale"] = data["novelty_rationale"].replace(bad, "")
    response = client.post(reverse("studies:review_submit", args=[assignment.pk]), data)
    assert response.status_code == 302


@hsettings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=st.text(min_size=1, max_size=200))
def test_autosave_never_fails_on_any_text(in_review, text):
    (assignment,) = in_review.assignments[in_review.reviewers[0].pk]
    client = Client()
    client.force_login(in_review.users[0])
    url = reverse("studies:review_autosave", args=[assignment.pk])
    data = {"novelty_rationale": text, "version": "0"}
    response = client.post(url, data, headers={"HX-Request": "true"})
    assert response.status_code in (200, 400)


# --------------------------------------------------------------------------- sizes


@pytest.mark.django_db
def test_an_upload_over_the_limit_gets_a_page_saying_the_size_and_the_limit(settings, owner):
    settings.IDEAREVIEW_MAX_UPLOAD_BYTES = 2**20
    client = Client()
    client.force_login(owner)
    body = b"x" * (2 * 2**20)
    response = client.generic("POST", "/studies/", body, content_type="application/octet-stream")
    assert response.status_code == 413
    text = response.content.decode()
    assert "2.0 MB" in text and "limit is 1.0 MB" in text


@pytest.mark.django_db
def test_form_data_over_the_limit_gets_the_same_page(settings, owner):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    client = Client()
    client.force_login(owner)
    response = client.post("/login/", {"username": "x" * 20_000, "password": "y"})
    assert response.status_code == 413
    assert "Too large" in response.content.decode()


# --------------------------------------------------------------------------- JSON


@given(
    st.recursive(
        st.none() | st.integers() | st.text(),
        lambda c: st.lists(c) | st.dictionaries(st.text(), c),
        max_leaves=30,
    )
)
def test_json_within_the_depth_limit_reads_as_json_does(value):
    text = json.dumps(value)
    assert jsonsafe.loads(text) == json.loads(text)


@given(st.integers(min_value=65, max_value=200_000), st.sampled_from(["[", '{"a":']))
@hsettings(max_examples=20, deadline=None)
def test_json_nested_too_deep_is_refused_with_a_decode_error(depth, opener):
    closer = "]" if opener == "[" else "}"
    text = opener * depth + "1" + closer * depth
    with pytest.raises(json.JSONDecodeError, match="nested deeper than 64 levels"):
        jsonsafe.loads(text)


def test_brackets_inside_strings_do_not_count():
    text = json.dumps({"rationale": "[" * 10_000})
    assert jsonsafe.loads(text) == {"rationale": "[" * 10_000}


@pytest.mark.django_db
def test_a_deeply_nested_review_upload_names_the_problem(owner):
    from studies.importers import ImportFailed
    from studies.services.study import study_create
    from studies.services.transfer import reviews_parse

    study = study_create(owner=owner, slug="deep", baseline_condition="Human")
    deep = ("[" * 50_000 + "]" * 50_000).encode()
    with pytest.raises(ImportFailed) as exc:
        reviews_parse(study=study, fmt="generic", reviews=deep, reviews_name="deep.json")
    assert "nested deeper than 64 levels" in str(exc.value.problems[0])


def test_a_deeply_nested_judge_parameter_is_a_form_error():
    from django import forms

    from judging.forms import _json_object

    with pytest.raises(forms.ValidationError, match="nested deeper than 64 levels"):
        _json_object("[" * 5000 + "]" * 5000, "Parameters")
