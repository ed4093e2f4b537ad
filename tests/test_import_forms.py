"""Review imports follow the study's form: any form's metrics and scales, and mapping
errors that name the field or column."""

from __future__ import annotations

import csv
import io
import json
import random

import pandas as pd
import pytest
from django.core.management import CommandError, call_command
from scipy import stats

from studies.analysis import plots
from studies.analysis.report import ReportOptions
from studies.models import ReviewScore, Study
from studies.protocol.forms import EXECUTION_FORM
from studies.report_files import report_build

EXEC_METRICS = EXECUTION_FORM.metric_keys


def execution_rows(seed: int = 7, ideas: int = 10, reviewers: int = 8) -> list[dict]:
    """An execution study's reviews: two conditions, two topics, three reviews an idea;
    the 1-10 metrics and the 1-5 code quality drawn independently."""
    rng = random.Random(seed)
    rows = []
    for cond in ("Human", "AI"):
        for i in range(ideas):
            topic = "Bias" if i % 2 else "Coding"
            for r in rng.sample(range(reviewers), 3):
                row = {
                    "idea_id": f"{cond}-{i}",
                    "condition": cond,
                    "topic": topic,
                    "reviewer_id": f"rev{r}",
                }
                for m in EXEC_METRICS:
                    if m == "code_quality":
                        row[m] = rng.randint(1, 5)
                    else:
                        row[m] = rng.randint(2 if cond == "AI" else 1, 10)
                        row[f"{m}_rationale"] = f"Because of reason {rng.randint(0, 999)}."
                row["familiarity"] = rng.randint(1, 5)
                row["confidence"] = rng.randint(1, 5)
                rows.append(row)
    return rows


def write_csv(path, rows, rename: dict[str, str] | None = None):
    rename = rename or {}
    fields = list(dict.fromkeys(k for r in rows for k in r))
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=[rename.get(f, f) for f in fields])
        w.writeheader()
        for r in rows:
            w.writerow({rename.get(k, k): v for k, v in r.items()})
    return path


def import_generic(path, *extra: str) -> str:
    out = io.StringIO()
    call_command(
        "import_reviews", "--format", "generic", "--reviews", str(path), *extra, stdout=out
    )
    return out.getvalue()


@pytest.fixture
def analyst(db):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user("analyst-x")


@pytest.mark.slow
def test_an_execution_form_import_is_analysed_under_its_own_names_and_scales(
    analyst, tmp_path, settings
):
    settings.IDEAREVIEW_CHROMIUM = str(tmp_path / "no-chromium")  # no PDF: seconds of chromium
    rows = execution_rows()
    # code quality arrives under the lab's own column name
    path = write_csv(tmp_path / "exec.csv", rows, rename={"code_quality": "code"})
    import_generic(
        path,
        "--study", "exec", "--form", "execution", "--owner", "analyst-x",
        "--baseline", "Human", "--map", "code_quality=code", "--human-conditions", "Human",
    )  # fmt: skip
    study = Study.objects.get(slug="exec")
    assert (study.review_form.key, study.review_form.version) == ("execution", 1)
    assert study.reviews.count() == len(rows)
    code = ReviewScore.objects.filter(review__study=study, metric="code_quality")
    assert code.count() == len(rows) and set(code.values_list("rationale", flat=True)) == {""}

    options = ReportOptions(
        consistency_splits=20,
        consistency_bootstrap=20,
        consistency_permutations=20,
        mixed_starts=1,
        agreement_splits=10,
        agreement_bootstrap=10,
        agreement_permutations=10,
    )
    snapshot = report_build(study=study, out_dir=tmp_path / "report", options=options)
    report = snapshot.data
    assert report["metrics"] == EXEC_METRICS
    assert report["study"]["scales"]["code_quality"] == [1, 5]
    assert report["study"]["scales"]["soundness"] == [1, 10]
    # Test 1 per metric, checked against scipy's Welch test on the file itself
    frame = pd.DataFrame(rows)
    comparisons = {c["metric"]: c for c in report["by_review"]["comparisons"]}
    assert set(comparisons) == set(EXEC_METRICS)
    for m in EXEC_METRICS:
        ai = frame.loc[frame.condition == "AI", m]
        human = frame.loc[frame.condition == "Human", m]
        welch = stats.ttest_ind(ai, human, equal_var=False)
        c = comparisons[m]
        assert abs(c["mean"] - ai.mean()) < 1e-9 and abs(c["mean_baseline"] - human.mean()) < 1e-9
        assert abs(c["t"] - welch.statistic) < 1e-6 and abs(c["p_two_sided"] - welch.pvalue) < 1e-6
    assert set(report["mixed_effects"]["fits"]) == set(EXEC_METRICS)
    html = (tmp_path / "report" / "report.html").read_text()
    assert "code_quality 1–5" in html and "faithfulness 1–10" in html
    tables = {p.name for p in (tmp_path / "report").glob("*.csv")}
    assert any("code_quality" in (tmp_path / "report" / t).read_text() for t in tables)


def test_an_execution_studys_package_exports_its_metrics_and_reimports_the_same_scores(
    analyst, tmp_path
):
    import zipfile
    from collections import Counter

    from studies.package import package_build

    rows = execution_rows()
    import_generic(
        write_csv(tmp_path / "exec.csv", rows),
        "--study", "exec", "--form", "execution", "--owner", "analyst-x",
        "--baseline", "Human", "--human-conditions", "Human",
    )  # fmt: skip
    study = Study.objects.get(slug="exec")
    package_build(study=study, out=tmp_path / "package.zip", use_report=False)
    with zipfile.ZipFile(tmp_path / "package.zip") as z:
        reviews = z.read("package/data/reviews.csv")
        form = z.read("package/review_form.json")
    header = next(csv.reader(io.StringIO(reviews.decode())))
    assert all(m in header for m in EXEC_METRICS)
    assert json.loads(form)["metrics"][-1]["maximum"] == 5  # code quality keeps its 1-5

    (tmp_path / "again.csv").write_bytes(reviews)
    (tmp_path / "form.json").write_bytes(form)
    import_generic(
        tmp_path / "again.csv",
        "--study", "exec-again", "--form", str(tmp_path / "form.json"), "--owner", "analyst-x",
        "--baseline", "Human", "--human-conditions", "Human",
    )  # fmt: skip
    again = Study.objects.get(slug="exec-again")
    assert again.form_definition() == study.form_definition()

    def scores(s: Study) -> Counter:
        return Counter(
            ReviewScore.objects.filter(review__study=s).values_list("metric", "score", "rationale")
        )

    assert scores(again) == scores(study)
    assert len(scores(study)) > 0 and sum(scores(study).values()) == len(rows) * len(EXEC_METRICS)


def test_a_plot_panel_spans_its_metrics_own_scale():
    df = pd.DataFrame({"condition": ["A", "A", "B"], "code_quality": [1, 5, 3]})
    five = plots.score_distributions(
        df, ["code_quality"], ["A", "B"], scales={"code_quality": (1, 5)}
    )
    ten = plots.score_distributions(df, ["code_quality"], ["A", "B"])
    assert ">5<" in five and ">10<" not in five
    assert ">10<" in ten


def test_a_score_outside_a_five_point_metric_is_refused_with_its_range(analyst, tmp_path):
    rows = execution_rows()
    rows[4]["code_quality"] = 7
    path = write_csv(tmp_path / "exec.csv", rows)
    with pytest.raises(
        CommandError,
        match=r"row 5, field 'code_quality': score '7' is outside the form's range 1–5",
    ):
        import_generic(path, "--study", "exec", "--form", "execution", "--owner", "analyst-x")
    assert not Study.objects.filter(slug="exec").exists()


def test_map_naming_a_field_the_form_lacks_is_refused_naming_it(analyst, tmp_path):
    rows = execution_rows()
    path = write_csv(tmp_path / "exec.csv", rows)
    # the default form (si2024) has no soundness
    with pytest.raises(CommandError) as exc:
        import_generic(
            path, "--study", "ideas", "--owner", "analyst-x", "--map", "soundness=soundness"
        )
    text = str(exc.value)
    assert (
        "field 'soundness': mapped field 'soundness': not a field of the study's form si2024 v2"
        in text
    )
    assert "its metrics: novelty, feasibility, effectiveness, excitement, overall" in text
    assert not Study.objects.filter(slug="ideas").exists()


def test_map_to_a_column_the_file_lacks_is_refused_naming_both(analyst, tmp_path):
    path = write_csv(tmp_path / "exec.csv", execution_rows())
    with pytest.raises(
        CommandError, match=r"field 'code_quality': mapped to column 'cq', which the file lacks"
    ):
        import_generic(
            path,
            "--study",
            "exec",
            "--form",
            "execution",
            "--owner",
            "analyst-x",
            "--map",
            "code_quality=cq",
        )
    with pytest.raises(
        CommandError, match=r"field 'minutes': mapped to column 'time', which the file lacks"
    ):
        import_generic(
            path,
            "--study",
            "exec",
            "--form",
            "execution",
            "--owner",
            "analyst-x",
            "--map",
            "minutes=time",
        )


def test_map_of_a_rationale_the_form_does_not_ask_for_is_refused(analyst, tmp_path):
    path = write_csv(tmp_path / "exec.csv", execution_rows())
    with pytest.raises(CommandError, match="the form asks no rationale for this metric"):
        import_generic(
            path, "--study", "exec", "--form", "execution", "--owner", "analyst-x",
            "--map", "code_quality_rationale=novelty_rationale",
        )  # fmt: skip


def test_form_of_an_existing_study_cannot_be_changed_by_an_import(analyst, tmp_path):
    path = write_csv(tmp_path / "exec.csv", execution_rows())
    import_generic(path, "--study", "exec", "--form", "execution", "--owner", "analyst-x")
    with pytest.raises(CommandError, match="already uses the review form execution v1"):
        import_generic(path, "--study", "exec", "--form", "si2024")
    # naming the study's own form again is fine, and changes nothing
    assert "nothing changed" in import_generic(path, "--study", "exec", "--form", "execution")


def test_a_form_file_creates_the_study_with_that_form(analyst, tmp_path):
    form = EXECUTION_FORM.to_dict() | {"key": "lab-exec"}
    (tmp_path / "form.json").write_text(json.dumps(form))
    path = write_csv(tmp_path / "exec.csv", execution_rows())
    import_generic(
        path, "--study", "lab", "--form", str(tmp_path / "form.json"), "--owner", "analyst-x"
    )
    assert Study.objects.get(slug="lab").review_form.key == "lab-exec"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(form | {"metrics": []}))
    with pytest.raises(CommandError, match="--form: .*bad.json"):
        import_generic(path, "--study", "lab2", "--form", str(bad), "--owner", "analyst-x")


def test_the_web_import_refuses_a_mapping_the_form_lacks_naming_it(client, owner, tmp_path):
    from django.urls import reverse

    from studies.services.study import study_create

    study = study_create(owner=owner, slug="web-map", form=EXECUTION_FORM)
    client.force_login(owner)
    path = write_csv(tmp_path / "exec.csv", execution_rows(), rename={"code_quality": "code"})
    url = reverse("studies:reviews_import_page", args=[study.slug])
    with path.open("rb") as fh:
        r = client.post(
            url,
            {"format": "generic", "reviews": fh, "mapping": '{"clarity": "code"}'},
        )
    page = r.content.decode()
    assert r.status_code == 400
    assert "field &#x27;clarity&#x27;: mapped field &#x27;clarity&#x27;: not a field" in page
    assert study.reviews.count() == 0
    with path.open("rb") as fh:
        r = client.post(
            url,
            {"format": "generic", "reviews": fh, "mapping": '{"code_quality": "code"}'},
        )
    assert r.status_code == 200 and study.reviews.count() == len(execution_rows())


def test_a_form_with_its_own_confidence_scale_checks_imports_against_it(analyst, tmp_path):
    form = EXECUTION_FORM.to_dict() | {"key": "short-confidence"}
    form["confidence"] = {"label": "Confidence", "minimum": 1, "maximum": 3, "rationale": "none"}
    (tmp_path / "form.json").write_text(json.dumps(form))
    rows = execution_rows()
    rows[1]["confidence"] = 4
    path = write_csv(tmp_path / "exec.csv", rows)
    with pytest.raises(
        CommandError,
        match="row 2, field 'confidence': confidence '4' is outside the form's range 1–3",
    ):
        import_generic(
            path, "--study", "c3", "--form", str(tmp_path / "form.json"), "--owner", "analyst-x"
        )
