"""The whole study end to end: `manage.py demo_study` at a small size."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from django.core.management import CommandError, call_command

from judging.models import JudgeRun
from studies.demo import EFFECTS, demo_study_build
from studies.models import Assignment, PairTask, Review, Study

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def no_pdf(settings):
    # The PDF is chromium's job and costs seconds; the report page tests cover it.
    settings.IDEAREVIEW_CHROMIUM = "/nonexistent/chromium"


def test_demo_study_command_builds_the_study_and_finds_the_simulated_effects(tmp_path, no_pdf):
    out = io.StringIO()
    call_command(
        "demo_study",
        "--slug",
        "demo-small",
        "--ideas-per-condition",
        "6",
        "--reviewers",
        "8",
        "--seed",
        "3",
        "--out",
        str(tmp_path / "report"),
        stdout=out,
        stderr=io.StringIO(),
    )
    text = out.getvalue()
    assert "all checks passed" in text, text

    study = Study.objects.get(slug="demo-small")
    assert study.status == Study.Status.REVIEWING
    assert study.ideas.exclude(normalization_status__in=["approved", "edited"]).count() == 0
    assert Review.objects.filter(study=study, status="submitted").count() == (
        Assignment.objects.filter(study=study).count()
    )
    assert PairTask.objects.filter(study=study, status="submitted").exists()
    methods = dict(JudgeRun.objects.filter(study=study).values_list("method", "status"))
    assert methods == {"direct": "done", "pairwise": "done", "baseline_random": "done"}

    report = json.loads((tmp_path / "report" / "report.json").read_text())
    comparisons = {(c["metric"], c["condition"]): c for c in report["by_review"]["comparisons"]}
    novelty = comparisons[("novelty", "AI")]
    assert abs(novelty["mean"] - novelty["mean_baseline"] - EFFECTS["novelty"]) < 0.8
    assert novelty["p_two_sided"] < 0.05
    assert report["agreement"]
    for name in ("report.html", "by_review.csv", "package.zip"):
        assert (tmp_path / "report" / name).exists(), name
    with zipfile.ZipFile(tmp_path / "report" / "package.zip") as z:
        names = z.namelist()
        # The AI condition's generating model is the team's to see, not the package's.
        for name in names:
            assert b"gpt-4o" not in z.read(name), name
    assert "package/README.md" in names and "package/manifest.json" in names
    # A panel of the direct judge and a second one: its run and its agreement in the report.
    panel = JudgeRun.objects.get(study=study, panel_members__isnull=False)
    assert panel.method == "direct" and panel.status == "done"
    assert len(panel.panel_configs()) == 2
    panels = [j for j in report["agreement"]["judges"] if "panel" in (j["info"] or {})]
    assert [j["info"]["run_id"] for j in panels] == [panel.pk]
    # Each single-judge LLM run asked a fifth of its prompts again: the report has its
    # repetition figures.
    judges = {j["method"]: j for j in report["agreement"]["judges"] if j not in panels}
    for method in ("direct", "pairwise"):
        rows = judges[method]["info"]["reliability"]["rows"]
        assert any(r["figure"] == "repetition" for r in rows), (method, rows)

    # A second run on the same slug refuses clearly and changes nothing.
    with pytest.raises(CommandError, match="exists already"):
        call_command("demo_study", "--slug", "demo-small", stdout=io.StringIO())
    assert Study.objects.filter(slug="demo-small").count() == 1


def test_demo_refuses_sizes_too_small_to_assign(db):
    from studies.demo import DemoError

    with pytest.raises(DemoError, match="at least 2"):
        demo_study_build(slug="tiny", ideas_per_condition=1, reviewers=4)


def test_without_judging_the_demo_asks_for_a_server_and_changes_nothing(db, monkeypatch):
    from studies import demo_judging
    from studies.demo import DemoError

    monkeypatch.setattr(demo_judging, "_judging", [])
    with pytest.raises(DemoError, match="pass base_url"):
        demo_study_build(slug="no-judging", ideas_per_condition=2, reviewers=2)
    assert not Study.objects.filter(slug="no-judging").exists()


def _report_version(tmp_path, agreement):
    """A report version in the reports storage (a folder under REPORTS_ROOT = tmp_path)."""
    from studies.demo import EFFECTS

    comparisons = [
        {"metric": m, "condition": "AI", "mean": 5 + EFFECTS[m], "mean_baseline": 5.0}
        | {"p_two_sided": 0.001, "n": 20, "n_baseline": 20}
        for m in ("novelty", "overall")
    ]
    report = {"by_review": {"comparisons": comparisons}, "agreement": agreement}
    folder = tmp_path / "demo" / "v1"
    folder.mkdir(parents=True)
    (folder / "report.json").write_text(json.dumps(report))
    for name in ("report.html", "package.zip"):
        (folder / name).write_text("")
    return "demo/v1"


def test_the_judge_checks_follow_the_runs_judging_reported(tmp_path, settings):
    from studies.demo import demo_checks
    from studies.demo_judging import DemoJudgeOutcome

    settings.REPORTS_ROOT = tmp_path
    directory = _report_version(tmp_path, {})
    # No judging: the checks are the report's own, and they pass.
    checks = demo_checks(directory, [])
    assert all(c.passed for c in checks) and not any("judge" in c.name for c in checks)
    runs = [
        DemoJudgeOutcome("direct", "done", "ok", finished=True),
        DemoJudgeOutcome("pairwise", "failed", "HTTP 500", finished=False),
    ]
    failed = {c.name for c in demo_checks(directory, runs) if not c.passed}
    # A run that did not finish fails, and so does a pairwise judge missing from the report.
    assert failed == {"judges finished", "pairwise judge vs human overall (Spearman)"}
