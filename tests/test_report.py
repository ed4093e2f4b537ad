"""The si2024 report as a user gets it: `study_report` writes report.json, report.html and
CSVs that reproduce the paper's Tables 7 and 8 and the released scripts' values."""

from __future__ import annotations

import csv
import io
import json
import os
import re

import pytest
from django.core.management import call_command

from tests.conftest import METRICS

# Published / released values (data/si2024 README of the shared reference):
# metric: (Human n, mean), (AI n, mean), (AI_Rerank n, mean), AI (t, p, p_bonf), Rerank (t, p, p_bonf)
TEST1 = {
    "novelty": (
        (119, 4.8403),
        (109, 5.6422),
        (109, 5.8073),
        (3.3936, 0.000815, 0.00408),
        (4.2097, 3.69e-05, 0.000185),
    ),
    "excitement": (
        (119, 4.5546),
        (109, 5.1927),
        (109, 5.4587),
        (2.6510, 0.00859, 0.043),
        (3.6659, 0.000307, 0.00154),
    ),
    "feasibility": (
        (119, 6.6134),
        (109, 6.3394),
        (109, 6.4404),
        (-1.0654, 0.288, 1),
        (-0.7185, 0.473, 1),
    ),
    "effectiveness": (
        (119, 5.1345),
        (109, 5.4679),
        (109, 5.5505),
        (1.5006, 0.135, 0.674),
        (1.9022, 0.0584, 0.292),
    ),
    "overall": (
        (119, 4.6807),
        (109, 4.8532),
        (109, 5.3394),
        (0.7209, 0.472, 1),
        (2.6879, 0.00773, 0.0386),
    ),
}
TEST2 = {
    "novelty": (
        (49, 4.8639),
        (49, 5.6224),
        (49, 5.7823),
        (2.7965, 0.00625, 0.0313),
        (3.8460, 0.000219, 0.00109),
    ),
    "excitement": (
        (49, 4.5578),
        (49, 5.1837),
        (49, 5.4456),
        (2.4615, 0.0157, 0.0783),
        (3.4465, 0.000852, 0.00426),
    ),
    "feasibility": (
        (49, 6.5340),
        (49, 6.3010),
        (49, 6.4150),
        (-0.8227, 0.413, 1),
        (-0.4488, 0.655, 1),
    ),
    "effectiveness": (
        (49, 5.1020),
        (49, 5.4847),
        (49, 5.5714),
        (1.5825, 0.117, 0.584),
        (2.1532, 0.0338, 0.169),
    ),
    "overall": (
        (49, 4.6871),
        (49, 4.8333),
        (49, 5.3197),
        (0.5721, 0.569, 1),
        (2.5821, 0.0113, 0.0567),
    ),
}
# REML, score ~ condition + (1|topic) + (1|idea): b_AI (SE), b_AI_Rerank, idea var, topic var, residual, loglik
MIXED = {
    "novelty": (0.7863, 0.2479, 0.9452, 0.3476, 0.0539, 2.6607, -664.7978),
    "excitement": (0.6345, 0.2556, 0.8978, 0.2963, 0.0374, 3.0036, -680.4320),
    "feasibility": (-0.2641, 0.2586, -0.1566, 0.3082, 0.0641, 3.0629, -684.5260),
    "effectiveness": (0.3299, 0.2201, 0.4073, 0.1026, 0.0714, 2.5023, -642.9518),
    "overall": (0.1672, 0.2487, 0.6511, 0.2166, 0.0670, 2.9944, -677.0379),
}


def close_p(ours: float, published: float) -> bool:
    """Within 1 % relative, allowing for the 3 significant digits the table prints."""
    return abs(ours - published) <= max(0.01 * published, 0.5 * 10 ** (_magnitude(published) - 2))


def _magnitude(x: float) -> int:
    import math

    return math.floor(math.log10(abs(x))) if x else 0


_BUILT: dict[str, object] = {}


# The si2024 report is built once per process (below): its tests go to one xdist worker.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("si2024-report")]


@pytest.fixture
def si2024_report(db, tmp_path_factory, settings):
    """Import and report once per test session; the rows go with the first test's
    transaction, the files stay for the others. Its figures and PDF are made: tests read
    them."""
    if "out" not in _BUILT:
        import ideareview.settings as configured

        settings.IDEAREVIEW_REPORT_FIGURES = True
        settings.IDEAREVIEW_CHROMIUM = configured.IDEAREVIEW_CHROMIUM  # and its PDF
        from django.contrib.auth import get_user_model

        out = tmp_path_factory.mktemp("report")
        get_user_model().objects.create_user("report-owner")
        call_command(
            "import_reviews",
            *_si_args(),
            "--owner",
            "report-owner",
            "--baseline",
            "Human",
            stdout=io.StringIO(),
        )
        call_command(
            "study_report", "si2024", "--out", str(out), stdout=io.StringIO(), stderr=io.StringIO()
        )
        _BUILT["out"] = out
    return _BUILT["out"]


def _si_args():
    from tests.conftest import SI_REVIEWS, SI_TITLES

    return [
        "--format",
        "si2024",
        "--reviews",
        str(SI_REVIEWS),
        "--titles",
        str(SI_TITLES),
        "--study",
        "si2024",
    ]


def _load(out):
    return json.loads((out / "report.json").read_text())


@pytest.mark.parametrize(("key", "table"), [("by_review", TEST1), ("by_idea", TEST2)])
def test_report_json_reproduces_tables_7_and_8(si2024_report, key, table):
    report = _load(si2024_report)
    comparisons = {(c["metric"], c["condition"]): c for c in report[key]["comparisons"]}
    for metric, (human, ai, rerank, ai_test, rerank_test) in table.items():
        for cond, (n, mean), (t, p, p_bonf) in [
            ("AI", ai, ai_test),
            ("AI_Rerank", rerank, rerank_test),
        ]:
            c = comparisons[(metric, cond)]
            assert c["n"] == n and abs(c["mean"] - mean) < 0.005, (metric, cond)
            assert c["n_baseline"] == human[0] and abs(c["mean_baseline"] - human[1]) < 0.005
            assert abs(c["t"] - t) < 5e-4, (metric, cond, c["t"], t)
            assert close_p(c["p_two_sided"], p), (metric, cond, c["p_two_sided"], p)
            assert close_p(c["p_two_sided_bonferroni"], p_bonf), (metric, cond, p_bonf)


def test_report_says_why_test_3_cannot_be_computed(si2024_report):
    report = _load(si2024_report)
    assert report["by_reviewer"]["available"] is False
    assert "reviewer" in report["by_reviewer"]["reason"]
    assert report["data"]["reviewers"] == 0
    for fit in report["mixed_effects"]["fits"].values():
        assert "reviewer_id" in fit["groups_dropped"]


def test_report_mixed_models_match_lme4_on_si2024(si2024_report):
    report = _load(si2024_report)
    for metric, (b_ai, se_ai, b_rr, v_idea, v_topic, v_res, loglik) in MIXED.items():
        fit = report["mixed_effects"]["fits"][metric]
        fixed = {row["term"]: row for row in fit["fixed"]}
        assert abs(fixed["condition[AI]"]["coef"] - b_ai) < 1e-3, metric
        assert abs(fixed["condition[AI]"]["se"] - se_ai) < 1e-3, metric
        assert abs(fixed["condition[AI_Rerank]"]["coef"] - b_rr) < 1e-3, metric
        var = fit["variance"]
        idea_key = next(k for k in var if "idea" in k)
        assert abs(var[idea_key] - v_idea) < 1e-3, metric
        assert abs(var["topic"] - v_topic) < 1e-3, metric
        assert abs(var["residual"] - v_res) < 1e-3, metric
        assert abs(fit["loglik"] - loglik) < 1e-2, metric
        # several starts, the best kept; whether they agreed is reported, not assumed
        assert len(fit["starts"]) >= 2 and abs(max(fit["starts"]) - fit["loglik"]) < 1e-6
        assert isinstance(fit["starts_agree"], bool)
        # hundreds of reviews: no warning that the Wald p is optimistic at this size
        assert fit["wald_caution"] is None, metric
    assert "wald-caution" not in (si2024_report / "report.html").read_text()


def test_report_consistency_lands_near_the_papers_56_percent(si2024_report):
    report = _load(si2024_report)
    main = report["consistency"]["by_metric"]["overall"]["all"]
    assert 0.545 < main["balanced_accuracy"] < 0.585
    assert main["n_splits"] == 1000
    assert main["ci_low"] < 0.5 < main["ci_high"]  # not clearly above chance
    assert 0.02 < main["p_value"] < 0.2
    alpha = report["reliability"]["krippendorff_alpha"]
    assert abs(alpha["overall"]["interval"] - 0.08) < 0.01
    assert abs(alpha["novelty"]["interval"] - 0.16) < 0.01


def test_report_pooled_statistics_state_their_rows(si2024_report):
    report = _load(si2024_report)
    assert report["correlations"]["rows"]["n"] == 337
    assert report["correlations"]["unique_reviews"]["n"] == 296
    assert abs(report["correlations"]["rows"]["matrix"]["overall"]["excitement"] - 0.860) < 5e-4
    assert abs(report["correlations"]["rows"]["matrix"]["novelty"]["feasibility"] - (-0.087)) < 5e-4
    assert any("296 unique reviews" in n for n in report["notes"])


def test_report_html_is_self_contained_with_plots(si2024_report):
    html = (si2024_report / "report.html").read_text()
    assert html.count("<svg") >= 4 + len(
        METRICS
    )  # distributions, heatmap, coefficients, consistency, topics
    for forbidden in ["<script src", "<link ", "http://", "https://"]:
        assert forbidden not in html.replace('xmlns="http://www.w3.org/2000/svg"', "").replace(
            'xmlns:xlink="http://www.w3.org/1999/xlink"', ""
        ), forbidden
    assert "Test 1" in html and "Mixed-effects models" in html and "Balanced accuracy" in html


def test_report_csvs_are_tidy_and_match_the_json(si2024_report):
    report = _load(si2024_report)
    for name in report["files"]["csv"]:
        assert (si2024_report / name).exists()
    rows = list(csv.DictReader((si2024_report / "by_review.csv").open()))
    assert len(rows) == len(report["by_review"]["comparisons"]) == 10
    first = next(r for r in rows if r["metric"] == "novelty" and r["condition"] == "AI")
    assert abs(float(first["mean"]) - 5.6422) < 5e-4


def test_report_agreement_without_judges_shows_the_ceiling_and_says_why(si2024_report):
    agreement = _load(si2024_report)["agreement"]
    assert agreement["n_judges"] == 0
    assert "no finished judge run" in agreement["reason"]
    table = next(t for t in agreement["tables"] if t["id"] == "consistency")
    ceiling = next(r for r in table["rows"] if r["kind"] == "ceiling")["cells"]["overall"]
    assert 0.545 < ceiling["value"] < 0.585
    assert ceiling["ci_low"] < ceiling["value"] < ceiling["ci_high"]
    assert ceiling["n"] > 0 and "bootstrap" in ceiling["how"]
    # No judge scored the other metrics, so their ceiling is not bootstrapped: the note
    # says so in words, not as "(0 resamples)".
    novelty = next(r for r in table["rows"] if r["kind"] == "ceiling")["cells"]["novelty"]
    assert novelty["value"] is not None and novelty["ci_low"] is None
    assert (
        "no interval: the report bootstraps the human ceiling only for its headline metric "
        "(overall) and for metrics a judge scored, and no judge scored novelty."
    ) in novelty["how"]
    assert "(1000 resamples)" in ceiling["how"]
    # longer-text-wins needs texts, which the si2024 release does not have: a reason, no number
    longer = agreement["baselines"]["baseline_longer"]
    assert longer["available"] is False and "no" in longer["reason"]
    assert not any(j["method"] == "baseline_longer" for j in agreement["judges"])
    # the random baseline is what chance gives, in the correlation table only: mean rho of
    # many random rankings about 0, with the range holding 95 % of them around it
    assert not any(r["key"] == "baseline_random" for r in table["rows"])
    corr = next(t for t in agreement["tables"] if t["id"] == "correlation")
    chance = next(r for r in corr["rows"] if r["key"] == "baseline_random")["cells"]["overall"]
    assert abs(chance["value"]) < 0.05 and chance["ci_low"] is None
    assert chance["range_low"] < chance["value"] < chance["range_high"]
    assert abs(chance["range_low"] + chance["range_high"]) < 0.05
    html = (si2024_report / "report.html").read_text()
    assert "Human ceiling (human–human)" in html and "cannot run" in html
    # The baseline's reason is one sentence, named as the run form names the method.
    assert "Baseline: longer text wins cannot run: none of the" in html
    assert re.search(r"cannot run:[^<]*cannot run", html) is None
    assert 'title="Human–human ceiling on overall' in html and 'id="fn-1"' in html
    assert "(0 resamples)" not in html
    rows = list(csv.DictReader((si2024_report / "agreement.csv").open()))
    assert any(r["kind"] == "ceiling" and r["column"] == "overall" for r in rows)
    assert any(r["row"] == "baseline_random" and r["range_high"] for r in rows)
    assert "Random ranking (chance)" in html and "95 % range" in html


@pytest.mark.pdf
def test_report_pdf_is_written_beside_the_html_and_has_pages(si2024_report):
    from studies.report_files import pdf_available, pdf_page_count

    report = _load(si2024_report)
    if not pdf_available():
        assert report["files"]["pdf"] is None and "chromium" in report["files"]["pdf_reason"]
        if os.environ.get("IDEAREVIEW_REQUIRE_BROWSER") == "1":
            pytest.fail("chromium is required (IDEAREVIEW_REQUIRE_BROWSER=1) but not installed")
        pytest.skip("chromium is not installed")
    pdf = si2024_report / "report.pdf"
    assert report["files"]["pdf"] == "report.pdf" and pdf.read_bytes().startswith(b"%PDF")
    assert pdf_page_count(pdf) >= 3


def test_the_pdf_printer_is_chromiums_headless_shell_when_installed(settings, monkeypatch):
    from studies import report_files

    settings.IDEAREVIEW_CHROMIUM = ""
    installed = {
        "chromium": "/usr/bin/chromium",
        "chromium-headless-shell": "/usr/bin/chromium-headless-shell",
    }
    monkeypatch.setattr(report_files.shutil, "which", installed.get)
    assert report_files._chromium() == "/usr/bin/chromium-headless-shell"
    del installed["chromium-headless-shell"]
    assert report_files._chromium() == "/usr/bin/chromium"
    installed.clear()
    assert report_files._chromium() is None and not report_files.pdf_available()
    # A configured printer is used as given, and only when it is there.
    settings.IDEAREVIEW_CHROMIUM = "/usr/bin/chromium"
    installed["/usr/bin/chromium"] = "/usr/bin/chromium"
    assert report_files._chromium() == "/usr/bin/chromium"


# R's ordinal::clmm (2022.11.16, gradTol 1e-8) on the released data, idea within condition:
# condition[AI], condition[AI_Rerank], idea SD, log-likelihood.
ORDINAL = {
    "overall": (0.122332, 0.652623, 0.459212, -660.508239),
    "novelty": (0.800538, 0.997151, 0.655049, -637.382598),
}


def test_report_ordinal_check_matches_clmm_on_si2024_in_json_csv_and_html(si2024_report):
    report = _load(si2024_report)
    assert report["ordinal"]["available"]
    assert set(report["ordinal"]["fits"]) == set(METRICS)
    for metric, (b_ai, b_rr, sd_idea, loglik) in ORDINAL.items():
        fit = report["ordinal"]["fits"][metric]
        fixed = {row["term"]: row for row in fit["fixed"]}
        assert abs(fixed["condition[AI]"]["coef"] - b_ai) < 1e-3, metric
        assert abs(fixed["condition[AI_Rerank]"]["coef"] - b_rr) < 1e-3, metric
        assert abs(fit["sd"]["source_idea_id"] - sd_idea) < 1e-3, metric
        assert abs(fit["loglik"] - loglik) < 1e-2, metric
        assert "reviewer_id" in fit["groups_dropped"]
    rows = list(csv.DictReader((si2024_report / "ordinal.csv").open()))
    ai = next(
        r
        for r in rows
        if (r["metric"], r["kind"], r["term"]) == ("overall", "fixed", "condition[AI]")
    )
    assert abs(float(ai["coef"]) - ORDINAL["overall"][0]) < 1e-3
    assert {r["kind"] for r in rows} == {"threshold", "fixed", "sd"}
    html = (si2024_report / "report.html").read_text()
    assert "Ordinal check" in html and "Odds ratio" in html


def test_report_mixed_effects_csv_flags_boundary_variances(si2024_report):
    report = _load(si2024_report)
    rows = list(csv.DictReader((si2024_report / "mixed_effects.csv").open()))
    variance = [r for r in rows if r["kind"] == "variance"]
    assert variance and all(r["boundary"] in ("True", "False") for r in variance)
    for r in variance:
        on_boundary = r["term"] in report["mixed_effects"]["fits"][r["metric"]]["boundary"]
        assert (r["boundary"] == "True") == on_boundary
