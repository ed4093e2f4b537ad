"""The agreement section of the report on a small seeded study with two judge runs made
directly in the database: a direct-scoring judge and a pairwise judge, beside reviewer
pair ratings."""

from __future__ import annotations

import json

import pytest

from tests.factories import FAST, make_agreement_study

pytestmark = pytest.mark.slow  # reports


@pytest.fixture
def agreement_report(db, owner, tmp_path, settings):
    from studies.report_files import report_build

    settings.REPORTS_ROOT = tmp_path
    seeded = make_agreement_study(owner)
    snap = report_build(study=seeded.study, out_dir=tmp_path / "rep", options=FAST)
    return seeded, tmp_path / "rep", snap


def _table(report, tid):
    return next(t for t in report["agreement"]["tables"] if t["id"] == tid)


def test_report_agreement_has_both_judges_beside_the_human_ceiling(agreement_report):
    seeded, out, _ = agreement_report
    report = json.loads((out / "report.json").read_text())
    agreement = report["agreement"]
    assert agreement["n_judges"] == 2 and agreement["reason"] is None
    cons = _table(report, "consistency")
    kinds = [r["kind"] for r in cons["rows"]]
    assert kinds[0] == "ceiling"
    direct_key, pair_key = f"run{seeded.direct.pk}", f"run{seeded.pairwise.pk}"
    rows = {r["key"]: r for r in cons["rows"]}
    # the direct judge scored every metric; the pairwise run's ratings stand for "overall"
    assert set(rows[direct_key]["cells"]) == set(report["metrics"])
    assert set(rows[pair_key]["cells"]) == {"overall"}
    good = rows[direct_key]["cells"]["overall"]
    assert good["value"] > 0.6 and good["ci_low"] < good["value"] < good["ci_high"]
    assert f"{good['n']} units" in good["how"] and "bootstrap" in good["how"]
    # the no-LLM baselines: texts exist here, so longer-text-wins is computed, and labelled
    assert agreement["baselines"]["baseline_longer"]["available"] is True
    assert rows["baseline_longer"]["kind"] == "baseline"
    # Spearman per judge, with CIs
    corr = {r["key"]: r for r in _table(report, "correlation")["rows"]}
    rho = corr[direct_key]["cells"]["overall"]
    assert rho["value"] > 0.5 and rho["ci_low"] is not None and rho["n"] == 32
    # beside them what chance gives: a mean rho of random rankings and its range, no CI
    chance = corr["baseline_random"]["cells"]["overall"]
    assert abs(chance["value"]) < 0.1 and chance["ci_low"] is None
    assert chance["range_low"] < -0.2 and chance["range_high"] > 0.2
    # Krippendorff's alpha: the pairwise run is a rater only on the dimension it compared
    alpha = {r["key"]: r for r in _table(report, "krippendorff")["rows"]}
    assert set(alpha[direct_key]["cells"]) == set(report["metrics"])
    assert set(alpha[pair_key]["cells"]) == {"overall"}
    left_out = {m: b["left_out"] for m, b in agreement["krippendorff"].items()}
    assert all(pair_key in left_out[m] for m in report["metrics"] if m != "overall")


@pytest.mark.figures
def test_report_pairwise_agreement_has_confusion_diagnostics_and_footnotes(agreement_report):
    seeded, out, _ = agreement_report
    report = json.loads((out / "report.json").read_text())
    pw = _table(report, "pairwise")
    assert pw["rows"][0]["kind"] == "ceiling"  # reviewer vs reviewer on the same kind of item
    judge_row = next(r for r in pw["rows"] if r["key"].startswith(f"run{seeded.pairwise.pk}"))
    acc = judge_row["cells"]["ratings_acc"]
    assert acc["n"] > 0 and acc["value"] > 0.5
    entry = next(j for j in report["agreement"]["judges"] if j["key"] == f"run{seeded.pairwise.pk}")
    confusion = entry["result"]["pairwise"]["by_dimension"]["overall"]["vs_human_ratings"][
        "confusion"
    ]
    assert sum(map(sum, confusion)) == acc["n"]
    diag = {r["key"]: r for r in _table(report, "diagnostics")["rows"]}
    pos = diag[f"run{seeded.pairwise.pk}"]["cells"]["position"]
    assert 0.5 < pos["value"] < 1 and pos["n"] > 0
    cost = diag[f"run{seeded.direct.pk}"]["cells"]["cost"]
    assert abs(cost["value"] - 0.0015) < 1e-9 and cost["n"] == 32
    # every number has one sentence: a title in the page and a numbered footnote in the file
    notes = report["agreement"]["footnotes"]
    cells = [
        c for t in report["agreement"]["tables"] for r in t["rows"] for c in r["cells"].values()
    ]
    assert len(notes) == len(cells) and all(c["how"] for c in cells)
    html = (out / "report.html").read_text()
    assert html.count('<li id="fn-') == len(notes)
    assert 'class="agreement-bars"' in html and 'class="agreement-scatter"' in html
    assert 'class="agreement-confusion"' in html and 'id="figures-off"' not in html
    assert "Human ceiling (human–human)" in html
    csv_text = (out / "agreement.csv").read_text()
    assert "ceiling" in csv_text and f"run{seeded.direct.pk}" in csv_text


def test_a_report_built_without_figures_keeps_its_tables_and_says_so(agreement_report):
    _, out, _ = agreement_report  # this test is not marked `figures`: the setting is off
    html = (out / "report.html").read_text()
    assert "<svg" not in html and "<figure" not in html
    assert 'id="figures-off"' in html and "IDEAREVIEW_REPORT_FIGURES" in html
    assert "Human ceiling (human–human)" in html and 'id="fn-1"' in html
    assert "Test 1" in html and "Mixed-effects models" in html


def test_report_carries_each_judge_runs_reliability_panel(agreement_report):
    from judging.reliability_panel import run_reliability

    seeded, out, _ = agreement_report
    report = json.loads((out / "report.json").read_text())
    judges = {j["key"]: j for j in report["agreement"]["judges"]}
    direct = judges[f"run{seeded.direct.pk}"]["info"]["reliability"]
    pair = judges[f"run{seeded.pairwise.pk}"]["info"]["reliability"]
    # The run page's figures at the report's resamples, the same numbers: calibration for
    # the direct run...
    assert direct["n_boot"] == FAST.panel_bootstrap
    panel = run_reliability(seeded.direct, n_boot=FAST.panel_bootstrap)
    slope = next(r for r in direct["rows"] if r["figure"] == "calibration" and r["on"] == "overall" and r["item"] == "slope")  # fmt: skip
    cal = next(r for r in panel["calibration"] if r["metric"] == "overall")
    assert slope["judge"] == cal["slope"]
    # ...Bradley-Terry raw and style-controlled for the pairwise one, and what is missing.
    assert {r["figure"] for r in pair["rows"]} == {"bt_raw", "bt_style_controlled"}
    assert any(n.startswith("self-preference") for n in pair["not_measured"])
    html = (out / "report.html").read_text()
    assert f'id="judge-reliability-run{seeded.pairwise.pk}"' in html
    assert "bt_style_controlled" in html
