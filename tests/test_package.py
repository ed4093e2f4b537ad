"""The reproducibility package: de-identified, stable, complete, and re-importable."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
import re
import zipfile

import pytest
from django.core.management import call_command

from studies.analysis import hypothesis as hyp
from studies.models import Study
from studies.package import package_build
from studies.report_files import pdf_available, pdf_page_count, report_build
from studies.selectors import review_frame
from tests.factories import (
    FAST,
    SECRET_INSTITUTIONS,
    SECRET_NAMES,
    make_agreement_study,
)

pytestmark = pytest.mark.slow  # a judged study, its report


@pytest.fixture(scope="module")
def built_once(django_db_setup, django_db_blocker, tmp_path_factory):
    """One judged study and its report (with the PDF) for the whole module: building it
    is most of each test's cost, and no test changes it. Each test still runs in its own
    transaction, so what a test writes (a payment handle, an audit entry, a re-imported
    study) is rolled back; the study itself goes at the end of the module."""
    from django.contrib.auth import get_user_model
    from django.test import override_settings

    from studies.models import AuditEvent
    from studies.services.study import study_delete

    tmp = tmp_path_factory.mktemp("pkg")
    with django_db_blocker.unblock(), override_settings(REPORTS_ROOT=tmp):
        owner = get_user_model().objects.create_user("pkg-owner")
        seeded = make_agreement_study(owner, slug="pkg")
        snap = report_build(study=seeded.study, out_dir=tmp / "rep", options=FAST)
    yield seeded, snap, tmp
    with django_db_blocker.unblock(), override_settings(REPORTS_ROOT=tmp):
        study_delete(study=seeded.study, confirm="pkg", actor=None)
        AuditEvent.objects.filter(study=None, verb="study_deleted", detail__slug="pkg").delete()
        owner.delete()


@pytest.fixture
def built(db, built_once, settings):
    settings.REPORTS_ROOT = built_once[2]
    return built_once


@pytest.fixture
def no_pdf(settings, tmp_path):
    """For tests that do not look at the PDF: chromium costs seconds per report."""
    settings.IDEAREVIEW_CHROMIUM = str(tmp_path / "no-chromium")


def _members(path):
    with zipfile.ZipFile(path) as z:
        return {n.removeprefix("package/"): z.read(n) for n in z.namelist()}


@pytest.mark.pdf
def test_package_holds_everything_and_nothing_that_identifies(built):
    seeded, snap, tmp = built
    files = _members(tmp / "rep" / "package.zip")
    for name in [
        "README.md",
        "data/reviews.csv",
        "data/ideas.csv",
        "data/pair_ratings.csv",
        "data/study.json",
        "form.json",
        "assignment.json",
        "judges/runs.json",
        "judges/prompts.json",
        "judges/calls.jsonl",
        "judges/judgments.csv",
        "judges/pairwise_outcomes.csv",
        "software.json",
        "manifest.json",
        "report/report.json",
        "report/report.html",
        "report/agreement.csv",
    ]:
        assert name in files, name
    # The PDF was printed from the HTML before the swap: it stays out (the HTML is in).
    if pdf_available():
        assert (tmp / "rep" / "report.pdf").read_bytes().startswith(b"%PDF")
    assert not [name for name in files if name.endswith(".pdf")]
    assert "print `report/report.html` instead" in files["README.md"].decode()
    forbidden = [*SECRET_NAMES, *SECRET_INSTITUTIONS, "orcid-0000", "@example.org"]
    forbidden += [m.external_id for i in seeded.ideas for m in i.memberships.all()]
    forbidden += ["127.0.0.1"]  # judge endpoints stay private
    for name, body in files.items():
        text = body.decode()
        for word in forbidden:
            assert word not in text, (name, word)
    # idea ids reveal no condition; the form keeps its anchors; judges keep model and prompts
    rows = list(csv.DictReader(io.StringIO(files["data/reviews.csv"].decode())))
    assert all(r["idea_id"].startswith("C") and len(r["idea_id"]) == 11 for r in rows)
    assert not any(c in r["idea_id"] for r in rows for c in ("Human", "AI"))
    assert "anchors" in files["form.json"].decode()
    runs = json.loads(files["judges/runs.json"])
    assert {r["model"] for r in runs} == {"test-scorer-1", "test-pair-1"}
    assert all(r["run"].startswith("J") for r in runs)
    call = json.loads(files["judges/calls.jsonl"].decode().splitlines()[0])
    assert call["prompt_hash"] and call["response_text"] and call["request"]["messages"]
    assert {"response_model", "system_fingerprint", "reasoning_tokens"} <= set(call)
    prompts = json.loads(files["judges/prompts.json"])["templates"]
    assert all(len(t["template_sha256"]) == 64 for t in prompts.values())
    assert "import_reviews --format generic" in files["README.md"].decode()


def test_package_keeps_pseudonyms_only_whatever_the_payments_csv_knows(built):
    """The owners' payments CSV names reviewers (name, email, payment details); the
    reproducibility package built from the same rows carries none of it."""
    from studies.models import Reviewer
    from studies.services.payments import payment_contacts, payments_csv, study_payment_run

    seeded, snap, tmp = built
    for rev in Reviewer.objects.filter(study=seeded.study):
        rev.payment_handle = f"paypal {rev.pseudonym.lower()}@handles.example"
        rev.save(update_fields=["payment_handle"])
    contacts = payment_contacts(seeded.study)
    owners_csv = payments_csv(study_payment_run(study=seeded.study), contacts)
    secrets = [w for c in contacts.values() for w in (c.name, c.email, c.payment_handle)]
    assert all(w and w in owners_csv for w in secrets if w)  # the CSV has them all
    assert len([w for w in secrets if "handles.example" in w]) == len(contacts)
    package_build(study=seeded.study, out=tmp / "paid.zip", report=snap)
    for name, body in _members(tmp / "paid.zip").items():
        text = body.decode()
        assert "handles.example" not in text and "@example.org" not in text, name
        for word in secrets:
            assert word not in text, (name, word)


def test_package_pseudonyms_are_stable_across_two_builds(no_pdf, built):
    seeded, snap, tmp = built
    package_build(study=seeded.study, out=tmp / "a.zip", report=snap)
    package_build(study=seeded.study, out=tmp / "b.zip", report=snap)
    a, b = _members(tmp / "a.zip"), _members(tmp / "b.zip")
    for name in ("data/reviews.csv", "data/ideas.csv", "data/pair_ratings.csv", "judges/runs.json"):
        assert a[name] == b[name], name


def test_without_judging_the_package_has_no_judges_folder_and_the_rest_unchanged(
    no_pdf, built, monkeypatch
):
    from studies import package

    seeded, snap, tmp = built
    package_build(study=seeded.study, out=tmp / "with.zip", report=snap)
    monkeypatch.setattr(package, "package_sections", {})
    package_build(study=seeded.study, out=tmp / "without.zip", report=snap)
    with_judges, without = _members(tmp / "with.zip"), _members(tmp / "without.zip")
    judges = {n for n in with_judges if n.startswith("judges/")}
    assert judges == {
        f"judges/{n}"
        for n in (
            "runs.json",
            "prompts.json",
            "calls.jsonl",
            "judgments.csv",
            "pairwise_outcomes.csv",
            "ratings.csv",
        )
    }
    assert set(without) == set(with_judges) - judges
    for name in set(without) - {"manifest.json"}:
        assert without[name] == with_judges[name], name
    assert not any(n.startswith("judges/") for n in json.loads(without["manifest.json"])["files"])


def test_package_round_trip_reproduces_test_1(no_pdf, built, owner):
    seeded, snap, tmp = built
    files = _members(tmp / "rep" / "package.zip")
    path = tmp / "reviews.csv"
    path.write_bytes(files["data/reviews.csv"])
    form_file = tmp / "review_form.json"
    form_file.write_bytes(files["review_form.json"])
    call_command(
        "import_reviews",
        "--format",
        "generic",
        "--reviews",
        str(path),
        "--study",
        "rerun",
        "--form",
        str(form_file),
        "--owner",
        owner.username,
        "--human-conditions",
        "Human",
        "--baseline",
        "Human",
        stdout=io.StringIO(),
    )
    metrics = seeded.study.form_definition().metric_keys
    conds = ["Human", "AI"]
    original = review_frame(seeded.study)
    rerun_study = Study.objects.get(slug="rerun")
    assert rerun_study.form_definition() == seeded.study.form_definition()
    rerun = review_frame(rerun_study)
    assert len(rerun) == len(original)
    t_orig = hyp.test_by_review(original, metrics, baseline="Human", conditions=conds)
    t_new = hyp.test_by_review(rerun, metrics, baseline="Human", conditions=conds)
    for a, b in zip(t_orig["comparisons"], t_new["comparisons"], strict=True):
        for key in (
            "n",
            "mean",
            "n_baseline",
            "mean_baseline",
            "t",
            "p_two_sided",
            "p_two_sided_bonferroni",
        ):
            assert a[key] == pytest.approx(b[key], rel=1e-12), key
    # and the report's own Test 1 in the package says the same
    packaged = json.loads(files["report/report.json"])["by_review"]["comparisons"]
    for a, b in zip(packaged, t_new["comparisons"], strict=True):
        assert a["t"] == pytest.approx(b["t"], rel=1e-9)


@pytest.mark.pdf
def test_study_package_command_writes_the_zip_and_the_pdf_has_pages(built, tmp_path):
    seeded, snap, tmp = built
    out = tmp_path / "cmd.zip"
    stdout = io.StringIO()
    call_command("study_package", seeded.study.slug, "--out", str(out), stdout=stdout)
    assert "package written" in stdout.getvalue() and zipfile.is_zipfile(out)
    if not pdf_available():
        if os.environ.get("IDEAREVIEW_REQUIRE_BROWSER") == "1":
            pytest.fail("chromium is required (IDEAREVIEW_REQUIRE_BROWSER=1) but not installed")
        pytest.skip("chromium is not installed")
    assert pdf_page_count(tmp / "rep" / "report.pdf") >= 2


def test_the_package_and_the_report_carry_the_audit_chains_head(built, owner):
    from studies.services.audit import audit, audit_chain_check

    seeded, snap, tmp = built
    at_report = snap.data["audit"]
    assert at_report["ok"] and at_report["head"] and at_report["entries"] >= 0
    audit(study=seeded.study, actor=owner, verb="something_after_the_report")
    package_build(study=seeded.study, out=tmp / "audited.zip", report=snap)
    chain = json.loads(_members(tmp / "audited.zip")["audit/chain.json"])
    now = audit_chain_check(seeded.study)
    assert chain == now.as_dict() and chain["ok"] and chain["head"] != at_report["head"]
    # the report's own "report_built" entry came after its head was taken, then ours
    assert chain["entries"] == at_report["entries"] + 2


def test_a_new_export_format_is_written_offered_and_de_identified(
    built, tmp_path, settings, no_pdf, monkeypatch, client
):
    """The export recipe of docs/architecture.md: one entry in REPORT_FORMATS with its
    writer, and the report writes it, lists it, offers it for download, and the package
    carries it with the idea ids swapped for pseudonyms."""
    from django.urls import reverse

    from studies import report_formats

    def ids_listing(report, df):
        return "ideas: " + " ".join(sorted(df["source_idea_id"].astype(str).unique())) + "\n"

    extra = report_formats.ReportFormat("ids", "ideas.txt", "idea list", text=True)
    extra = dataclasses.replace(extra, write=ids_listing)
    monkeypatch.setattr(report_formats, "REPORT_FORMATS", [*report_formats.REPORT_FORMATS, extra])
    for module in ("studies.report_files", "studies.views.study"):
        monkeypatch.setattr(f"{module}.REPORT_FORMATS", report_formats.REPORT_FORMATS)
    seeded = built[0]
    settings.REPORTS_ROOT = tmp_path
    snap = report_build(study=seeded.study, out_dir=tmp_path / "rep", options=FAST)
    assert snap.data["files"]["ids"] == "ideas.txt"
    external = [m.external_id for i in seeded.ideas for m in i.memberships.all()]
    assert any(e in (tmp_path / "rep" / "ideas.txt").read_text() for e in external)

    client.force_login(seeded.study.owner)
    page = client.get(reverse("studies:study_report", args=["pkg"])).content.decode()
    assert 'id="download-ids"' in page and "idea list" in page
    served = client.get(reverse("studies:study_report_file", args=["pkg", "ideas.txt"]))
    assert served.status_code == 200

    packaged = _members(tmp_path / "rep" / "package.zip")["report/ideas.txt"].decode()
    assert packaged.startswith("ideas: C") and not any(e in packaged for e in external)

    # A binary format that does not declare itself free of ids cannot enter the package.
    binary = dataclasses.replace(extra, name="ideas.bin", text=False, write=lambda r, d: b"x")
    monkeypatch.setattr(report_formats, "REPORT_FORMATS", [binary])
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "ideas.bin").write_bytes(b"x")
    with pytest.raises(ValueError, match="not declared free of idea ids"):
        package_build(study=seeded.study, out=tmp_path / "p.zip", report_dir=tmp_path / "bin")


# A study whose reviewer codes and external ids are distinctive words, so that one left
# anywhere in the package is found by a plain search.
PASTED = (  # 41 words: the one rationale long enough for the plan's duplicate check
    "This proposal hinges on a retrieval step whose recall is never measured, so the claimed "
    "gains may come from the benchmark overlap rather than the method, and the plan should "
    "add an ablation without retrieval and report variance over several seeds"
)


def _rows(body: bytes) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(body.decode())))


@pytest.fixture
def named_study(db, owner, settings, tmp_path, no_pdf):
    """A committed assignment over reviewers coded `Rzephyr0`… and ideas with external
    ids `lovelace-…` (one numeric: `4711`), every assignment reviewed: reviewer 1
    straight-lines, reviewer 2 is fast, reviewers 0 and 3 paste one rationale. Then a
    note and a problem naming an idea and a reviewer, as the solver's can, and the
    report with its package."""
    from studies.models import Assignment, IdeaCondition, JobRun
    from studies.reviewer_forms import ReviewAnswersForm
    from studies.services.assignment import assignment_commit, assignment_preview
    from studies.services.reviews import review_submit
    from studies.services.study import study_open_for_review, study_plan_set
    from tests.factories import make_review_study

    settings.REPORTS_ROOT = tmp_path
    seeded = make_review_study(owner, slug="named", commit=False)
    study = seeded.study
    codes = []
    for j, reviewer in enumerate(seeded.reviewers):
        reviewer.pseudonym = f"Rzephyr{j}"
        reviewer.save(update_fields=["pseudonym"])
        codes.append(reviewer.pseudonym)
    externals = []
    for k, member in enumerate(IdeaCondition.objects.filter(study=study).order_by("pk")):
        member.external_id = "4711" if k == 0 else f"lovelace-{k}"
        member.save(update_fields=["external_id"])
        externals.append(member.external_id)
    job, result, _ = assignment_preview(study=study, seed=7)
    assert result.feasible, result.explanation()
    assignment_commit(study=study, job=job)
    job = JobRun.objects.get(pk=job.pk)
    job.params = {
        **job.params,
        "notes": [
            *job.params["notes"],
            f"{codes[0]} asked for fewer ideas than {externals[1]} needs",
            "idea 4711 kept its fixed reviews",
        ],
        "problems": [f"reviewer id {codes[1]} appears twice"],
    }
    job.save(update_fields=["params"])
    study_open_for_review(study=study)
    study_plan_set(
        study=study,
        source={
            "primary_metrics": ["overall"],
            "quality": {"min_minutes": 2, "duplicate_min_words": 40, "exclude": ["fast"]},
        },
        actor=owner,
    )
    definition = study.form_definition()
    metrics = definition.metric_keys
    pasted = {seeded.reviewers[0].pk: False, seeded.reviewers[3].pk: False}
    for a in Assignment.objects.filter(study=study).select_related("reviewer").order_by("pk"):
        j = codes.index(a.reviewer.pseudonym)
        base = 4 + (a.idea_id % 3) + j % 3
        scores = [6] * len(metrics) if j == 1 else [base + k % 3 for k in range(len(metrics))]
        data = {m: str(s) for m, s in zip(metrics, scores, strict=True)}
        for k, m in enumerate(metrics):
            data[f"{m}_rationale"] = " ".join(f"point{a.pk}x{k}x{w}" for w in range(26))
        if pasted.get(a.reviewer_id) is False:
            data[f"{metrics[0]}_rationale"] = PASTED
            pasted[a.reviewer_id] = True
        data.update(familiarity="3", confidence="4", minutes="20")
        form = ReviewAnswersForm(data, definition=definition)
        assert form.is_valid(), form.errors
        Assignment.objects.filter(pk=a.pk).update(active_seconds=30.0 if j == 2 else 900.0)
        a.refresh_from_db()
        review_submit(assignment=a, cleaned=form.cleaned_data)
    snap = report_build(study=study, out_dir=tmp_path / "rep", options=FAST)
    return snap, codes, externals, tmp_path


def test_the_solver_log_and_the_report_name_reviewers_and_reviews_as_the_data_does(named_study):
    """The committed preview's tables, notes and problems name reviewers by their codes
    and ideas by their external ids, and the report's leniency and flags name reviewers
    by their codes and reviews by their row ids: in the package, all of them carry the
    pseudonyms of data/, or are left out."""
    snap, codes, externals, tmp = named_study
    files = _members(tmp / "rep" / "package.zip")
    lettered = [*codes, *(e for e in externals if not e.isdigit())]
    for name, body in files.items():
        text = body.decode()
        for word in lettered:
            assert word not in text, (name, word)
        assert "zephyr" not in text and "lovelace" not in text, name

    reviews = _rows(files["data/reviews.csv"])
    reviewers = {r["reviewer_id"] for r in reviews}
    review_ids = {r["review_id"] for r in reviews}
    ideas = {r["idea_id"] for r in reviews}

    log = json.loads(files["assignment.json"])["solver_log"]
    assert "pairs" not in log and "fingerprint" not in log
    assert log["seed"] == snap.study.assignment_seed and log["status"] in ("optimal", "time_limit")
    assert log["n_assignments"] > 0 and log["committed_at"] and "value" in log["objective"]
    summary = log["summary"]
    assert summary["reviews_per_idea"] and summary["topics"]
    assert reviewers <= {r["reviewer"] for r in summary["reviewers"]}
    assert {r["idea"] for r in summary["ideas"]} <= ideas
    assert len(summary["ideas"]) == len({r["idea"] for r in summary["ideas"]}) > 1
    assert [r["reviewer"] for r in summary["reviewers"]] == sorted(reviewers)
    # The lettered ids in the notes and problems carry their pseudonyms; a line naming
    # a numeric id (which no text swap can tell from a figure) is withheld.
    assert any(n.startswith(tuple(reviewers)) for n in log["notes"])
    assert any(i in n for n in log["notes"] for i in ideas)
    assert log["notes_withheld"] == 1 and not any("4711" in n for n in log["notes"])
    assert log["problems"] and all("appears twice" in p for p in log["problems"])

    leniency = _rows(files["report/leniency.csv"])
    assert leniency and {r["reviewer_id"] for r in leniency} <= reviewers
    flags = _rows(files["report/quality_flags.csv"])
    assert {r["kind"] for r in flags} >= {"straight_line", "fast", "duplicate_other"}
    assert {r["reviewer_id"] for r in flags} <= reviewers
    assert {r["review_id"] for r in flags} <= review_ids
    # Rows follow no sign-up or submission order: sorted by their (pseudonymous) cells.
    assert [list(r.values()) for r in flags] == sorted(list(r.values()) for r in flags)
    assert [list(r.values()) for r in leniency] == sorted(list(r.values()) for r in leniency)
    for flag in flags:
        if flag["kind"] == "duplicate_other":
            other = flag["detail"].split("~ review ")[1].split("'s ")[0]
            assert other in review_ids and other != flag["review_id"]

    report = json.loads(files["report/report.json"])
    q = report["quality"]
    assert {f["review_id"] for f in q["flags"]} <= review_ids
    assert [f["review_id"] for f in q["flags"]] == sorted(f["review_id"] for f in q["flags"])
    assert {f["reviewer_id"] for f in q["flags"]} <= reviewers
    removed = set(q["exclusion"]["removed"])
    assert removed and removed <= review_ids
    assert removed == {i for rule in q["exclusion"]["rules"] for i in rule["review_ids"]}
    assert {r["reviewer_id"] for b in q["leniency"].values() for r in b["rows"]} <= reviewers
    html = files["report/report.html"].decode()
    assert any(r in html for r in reviewers)


def test_the_packaged_report_joins_the_data_on_reviewer(no_pdf, built):
    """The judged study's reviewers are R001…R008 in the report: the package's
    leniency table names them as data/reviews.csv does, and no code is left anywhere."""
    seeded, snap, tmp = built
    files = _members(tmp / "rep" / "package.zip")
    reviewers = {r["reviewer_id"] for r in _rows(files["data/reviews.csv"])}
    leniency = _rows(files["report/leniency.csv"])
    assert leniency and {r["reviewer_id"] for r in leniency} <= reviewers
    for name, body in files.items():
        if not name.endswith(".pdf"):
            assert not re.search(r"\bR00\d\b", body.decode()), name
