"""The report follows the study's analysis plan: one-sided tests, the planned
multiple-testing method and families, and pre-registration with deviations shown."""

from __future__ import annotations

import csv
import io
import json
import random
import re
import zipfile

import pytest
from django.core.management import CommandError, call_command
from scipy import stats
from statsmodels.stats.multitest import multipletests

from studies.analysis.plan import PlanError
from studies.analysis.report import ReportOptions
from studies.models import Study
from studies.report_files import report_build
from studies.services.study import study_plan_freeze, study_plan_set
from studies.templatetags.report_format import pval

pytestmark = pytest.mark.slow  # a report per test

FIVE = ["novelty", "excitement", "soundness", "effectiveness", "overall"]
ALL = [*FIVE, "faithfulness", "code_quality"]
SM = {"bh": "fdr_bh", "holm": "holm", "bonferroni": "bonferroni"}
OPTIONS = ReportOptions(
    consistency_splits=10,
    consistency_bootstrap=10,
    consistency_permutations=10,
    mixed_starts=1,
    agreement_splits=5,
    agreement_bootstrap=5,
    agreement_permutations=5,
    ordinal="none",
)


def _rows(seed: int = 11) -> list[dict]:
    """An execution-form study: Human and AI, 14 ideas each, 3 of 10 reviewers per idea;
    AI scores a little lower on the 1-10 metrics."""
    rng = random.Random(seed)
    rows = []
    for cond in ("Human", "AI"):
        for i in range(14):
            for r in rng.sample(range(10), 3):
                row = {
                    "idea_id": f"{cond}-{i}",
                    "condition": cond,
                    "topic": "Bias" if i % 2 else "Coding",
                    "reviewer_id": f"rev{r}",
                    "familiarity": rng.randint(1, 5),
                    "confidence": rng.randint(1, 5),
                }
                for m in ALL:
                    if m == "code_quality":
                        row[m] = rng.randint(1, 5)
                    else:
                        row[m] = min(10, max(1, rng.randint(3, 9) + (1 if cond == "Human" else 0)))
                        row[f"{m}_rationale"] = "Because."
                rows.append(row)
    return rows


@pytest.fixture
def exec_study(db, tmp_path, settings):
    from django.contrib.auth import get_user_model

    # No PDF (chromium costs seconds per report; the report page tests print one). The
    # setting, not the environment variable: settings were read before the test started.
    settings.IDEAREVIEW_CHROMIUM = str(tmp_path / "no-chromium")
    get_user_model().objects.create_user("plan-owner")
    rows = _rows()
    path = tmp_path / "exec.csv"
    fields = list(dict.fromkeys(k for r in rows for k in r))
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    call_command(
        "import_reviews", "--format", "generic", "--reviews", str(path), "--study", "exec",
        "--form", "execution", "--owner", "plan-owner", "--baseline", "Human",
        "--human-conditions", "Human", stdout=io.StringIO(),
    )  # fmt: skip
    return Study.objects.get(slug="exec"), rows


def _one_sided_plan(method: str) -> dict:
    return {
        "primary_metrics": ["overall"],
        "secondary_metrics": [m for m in FIVE if m != "overall"],
        "hypotheses": [{"direction": "AI < Human"}],
        "multiple_testing": {"method": method, "families": "per_test"},
    }


def _by_reviewer_p(rows: list[dict], metric: str) -> float:
    """Test 3 by hand: each reviewer's mean on AI minus their mean on Human, over the
    reviewers who scored both, one-sided one-sample t against 0 (scipy)."""
    scores: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        scores.setdefault((r["reviewer_id"], r["condition"]), []).append(r[metric])
    diffs = [
        sum(ai) / len(ai) - sum(hu) / len(hu)
        for (rev, cond), ai in scores.items()
        if cond == "AI" and (hu := scores.get((rev, "Human")))
    ]
    return float(stats.ttest_1samp(diffs, 0.0, alternative="less").pvalue)


def _expected(rows: list[dict], method: str, test: str) -> dict[str, tuple[float, float]]:
    """scipy's one-sided p per metric (Welch on reviews or idea means; Test 3's one-sample
    t on per-reviewer differences), then statsmodels' adjustment over the five."""
    raw = []
    for m in FIVE:
        if test == "by_reviewer":
            raw.append(_by_reviewer_p(rows, m))
            continue
        if test == "by_review":
            ai = [r[m] for r in rows if r["condition"] == "AI"]
            hu = [r[m] for r in rows if r["condition"] == "Human"]
        else:
            means: dict[tuple[str, str], list[float]] = {}
            for r in rows:
                means.setdefault((r["condition"], r["idea_id"]), []).append(r[m])
            ai = [sum(v) / len(v) for (c, _), v in means.items() if c == "AI"]
            hu = [sum(v) / len(v) for (c, _), v in means.items() if c == "Human"]
        raw.append(stats.ttest_ind(ai, hu, equal_var=False, alternative="less").pvalue)
    adjusted = multipletests(raw, method=SM[method])[1]
    return {m: (p, q) for m, p, q in zip(FIVE, raw, adjusted, strict=True)}


@pytest.mark.parametrize("method", ["bh", "holm", "bonferroni"])
def test_one_sided_plan_on_a_non_default_form_gives_statsmodels_adjusted_p(
    exec_study, tmp_path, method
):
    study, rows = exec_study
    study_plan_set(study=study, source=json.dumps(_one_sided_plan(method)), actor=None)
    out = tmp_path / "report"
    report = report_build(study=study, out_dir=out, options=OPTIONS).data
    assert report["plan"]["multiplicity"]["method"] == method
    for test in ("by_review", "by_idea", "by_reviewer"):
        expected = _expected(rows, method, test)
        got = {c["metric"]: c for c in report[test]["comparisons"]}
        for m, (p, q) in expected.items():
            assert got[m]["alternative"] == "less"
            assert got[m]["p_unadjusted"] == pytest.approx(p, rel=1e-9), (test, m)
            assert got[m]["p_adjusted"] == pytest.approx(q, rel=1e-9), (test, m)
        # metrics outside the plan are reported but in no family
        assert got["faithfulness"]["family"] == "" and got["faithfulness"]["p_adjusted"] is None
        with (out / f"{test}.csv").open() as fh:
            csv_rows = {r["metric"]: r for r in csv.DictReader(fh)}
        for m, (_, q) in expected.items():
            assert float(csv_rows[m]["p_adjusted"]) == pytest.approx(q, rel=1e-9)
            assert csv_rows[m]["alternative"] == "less" and csv_rows[m]["adjustment"] == method
    with (out / "multiplicity.csv").open() as fh:
        mult = list(csv.DictReader(fh))
    assert len(mult) == 15 and {r["method"] for r in mult} == {method}
    assert {r["plan"] for r in mult} == {"current"}
    for test in ("by_review", "by_idea", "by_reviewer"):
        expected = _expected(rows, method, test)
        got = {r["metric"]: r for r in mult if r["test"] == test}
        assert set(got) == set(FIVE) and {r["family_size"] for r in got.values()} == {"5"}
        for m, (p, q) in expected.items():
            assert float(got[m]["p_unadjusted"]) == pytest.approx(p, rel=1e-9), (test, m)
            assert float(got[m]["p_adjusted"]) == pytest.approx(q, rel=1e-9), (test, m)
    html = (out / "report.html").read_text()
    assert "Analysis plan" in html and "p (planned)" in html
    for test in ("by_review", "by_idea", "by_reviewer"):
        for m, (p, q) in _expected(rows, method, test).items():
            cells = (
                f'<td class="l">{test}</td><td>{m}</td><td class="l">AI</td>'
                f'<td class="l">less</td><td>{re.escape(pval(p))}</td><td class="[a-z]*">{re.escape(pval(q))}</td>'
            )
            assert re.search(cells, html), (test, m, pval(q))


def test_a_plan_changed_after_freezing_shows_the_deviation_and_both_results(exec_study, tmp_path):
    study, rows = exec_study
    digest = study_plan_freeze(study=study, actor=None)  # the default plan
    study_plan_set(study=study, source=json.dumps(_one_sided_plan("bh")), actor=None)
    study.refresh_from_db()
    out = tmp_path / "report"
    report = report_build(study=study, out_dir=out, options=OPTIONS).data
    plan = report["plan"]
    assert plan["deviation"] is True
    assert plan["registered"]["hash"] == digest != plan["hash"]
    assert plan["registered"]["frozen_at"].startswith(str(study.analysis_plan_frozen_at.year))
    # registered: two-sided Bonferroni over the 7 metrics per comparison = p_two_sided_bonferroni
    registered = {
        (m["test"], m["metric"]): m
        for fam in plan["registered"]["multiplicity"]["families"]
        for m in fam["members"]
    }
    for c in report["by_review"]["comparisons"]:
        reg = registered[("by_review", c["metric"])]
        assert reg["alternative"] == "two-sided"
        assert reg["p_adjusted"] == pytest.approx(c["p_two_sided_bonferroni"], rel=1e-12)
    expected = _expected(rows, "bh", "by_review")
    for c in report["by_review"]["comparisons"]:
        if c["metric"] in expected:
            assert c["p_adjusted"] == pytest.approx(expected[c["metric"]][1], rel=1e-9)
    html = (out / "report.html").read_text()
    top = html[: html.index('<h2 id="data">')]
    assert "Deviation from the registered plan" in top and digest[:12] in top
    assert "Registered plan: its families and results" in html
    with (out / "multiplicity.csv").open() as fh:
        assert {r["plan"] for r in csv.DictReader(fh)} == {"current", "registered"}
    with zipfile.ZipFile(out / "package.zip") as z:
        reg = json.loads(z.read("package/plan/registration.json"))
        current = json.loads(z.read("package/plan/current.json"))
    assert reg["registered"]["hash"] == digest and reg["deviation"] is True
    assert reg["registered"]["frozen_at"] == plan["registered"]["frozen_at"]
    assert current["multiple_testing"]["method"] == "bh"


def test_a_report_that_follows_the_frozen_plan_names_it_without_deviation(exec_study, tmp_path):
    study, _ = exec_study
    study_plan_set(study=study, source=json.dumps(_one_sided_plan("holm")), actor=None)
    digest = study_plan_freeze(study=study, actor=None)
    study.refresh_from_db()
    report = report_build(study=study, out_dir=tmp_path / "r", options=OPTIONS).data
    assert report["plan"]["deviation"] is False and report["plan"]["hash"] == digest
    assert report["plan"]["registered"]["hash"] == digest


def test_a_plan_cannot_be_frozen_after_the_first_report(exec_study, tmp_path):
    study, _ = exec_study
    report_build(study=study, out_dir=tmp_path / "r", options=OPTIONS)
    with pytest.raises(PlanError, match="report has been built"):
        study_plan_freeze(study=study, actor=None)


def test_study_plan_command_sets_freezes_and_names_bad_fields(exec_study, tmp_path):
    study, _ = exec_study
    good = tmp_path / "plan.json"
    good.write_text(json.dumps(_one_sided_plan("bh")))
    out, err = io.StringIO(), io.StringIO()
    call_command("study_plan", "exec", "--set", str(good), "--freeze", stdout=out, stderr=err)
    assert json.loads(out.getvalue())["multiple_testing"]["method"] == "bh"
    assert "frozen" in err.getvalue()
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"primary_metrics": ["clarity"]}))
    with pytest.raises(CommandError, match=r"bad.json: primary_metrics: 'clarity'"):
        call_command("study_plan", "exec", "--set", str(bad), stdout=io.StringIO())
    study.refresh_from_db()
    assert study.analysis_plan["multiple_testing"]["method"] == "bh"


def test_registered_mixed_model_results_come_from_the_registered_formula(exec_study, tmp_path):
    """A plan registered without covariates, changed to adjust for familiarity and
    confidence: the registered plan's mixed-model p-values are those of the registered
    model (as a report following it gives them), not of the changed one."""
    study, _ = exec_study
    registered_plan = {
        "primary_metrics": ["overall"],
        "tests": ["by_idea", "mixed"],
        "hypotheses": [{"direction": "AI < Human"}],
        "multiple_testing": {"method": "holm", "families": "per_test"},
        "seed": 5,
    }
    study_plan_set(study=study, source=json.dumps(registered_plan), actor=None)
    study_plan_freeze(study=study, actor=None)
    study.refresh_from_db()
    first = report_build(study=study, out_dir=tmp_path / "r1", options=OPTIONS).data
    assert first["plan"]["deviation"] is False

    def mixed_members(section: dict) -> dict[str, dict]:
        return {
            m["metric"]: m
            for fam in section["families"]
            for m in fam["members"]
            if m["test"] == "mixed"
        }

    as_registered = mixed_members(first["plan"]["multiplicity"])
    assert set(as_registered) == {"overall"}
    changed = {
        **registered_plan,
        "mixed_model": {"covariates": ["familiarity", "confidence"]},
        "seed": 6,
    }
    study_plan_set(study=study, source=json.dumps(changed), actor=None)
    out = tmp_path / "r2"
    second = report_build(study=study, out_dir=out, options=OPTIONS).data
    plan = second["plan"]
    assert plan["deviation"] is True
    current = mixed_members(plan["multiplicity"])
    registered = mixed_members(plan["registered"]["multiplicity"])
    terms = {r["term"] for r in second["mixed_effects"]["fits"]["overall"]["fixed"]}
    assert {"familiarity", "confidence"} <= terms
    assert current["overall"]["p_unadjusted"] != pytest.approx(
        as_registered["overall"]["p_unadjusted"], rel=1e-6
    )
    assert registered["overall"]["alternative"] == as_registered["overall"]["alternative"]
    for key in ("p_unadjusted", "p_adjusted"):
        assert registered["overall"][key] == pytest.approx(as_registered["overall"][key], rel=1e-9)
    assert "familiarity" not in plan["registered"]["mixed_model"]
    assert "familiarity" in second["mixed_effects"]["model"]
    assert plan["registered"]["not_recomputed"] == ["seed: registered 5, current 6"]
    assert (first["options"]["seed"], second["options"]["seed"]) == (5, 6)  # the plan's seed
    html = (out / "report.html").read_text()
    assert "The registered plan's mixed model differs" in html
    assert "seed: registered 5, current 6" in html


def _planned_rows(html: str) -> list[list[str]]:
    """The body rows of the Tests 1-3 tables under a non-default plan, as cell texts."""
    rows = []
    for table in re.findall(r'<table class="planned-tests">(.*?)</table>', html, re.S):
        body = table.split("<tbody>", 1)[1]
        for tr in re.findall(r"<tr>(.*?)</tr>", body, re.S):
            rows.append(
                [
                    re.sub(r"<[^>]+>", "", td).strip()
                    for td in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)
                ]
            )
    return rows


@pytest.mark.parametrize("direction", ["AI < Human", "AI > Human"])
def test_a_one_sided_bh_report_speaks_the_plan_in_text_stars_and_json(
    exec_study, tmp_path, direction
):
    """Under a one-sided Benjamini-Hochberg plan the sentence above the tests, the table
    captions, the stars and report.json all say one-sided and Benjamini-Hochberg; stars
    come from the plan's adjusted p, and the paper's two-sided Bonferroni p sits in its
    own labelled columns without stars (AI scores lower, so under "AI > Human" the
    Bonferroni p are small while the plan's adjusted p are near 1)."""
    study, rows = exec_study
    plan = {**_one_sided_plan("bh"), "hypotheses": [{"direction": direction}]}
    study_plan_set(study=study, source=json.dumps(plan), actor=None)
    out = tmp_path / "report"
    report = report_build(study=study, out_dir=out, options=OPTIONS).data
    alternative = "less" if "<" in direction else "greater"

    voice = report["plan"]["voice"]
    assert voice["sidedness"] == "one-sided" and voice["method_label"] == "Benjamini–Hochberg"
    assert f"one-sided ({direction})" in voice["sentence"]
    assert "Benjamini–Hochberg" in voice["sentence"] and "α = 0.05" in voice["sentence"]
    assert "two-sided; Bonferroni" not in voice["sentence"]
    for test in ("by_review", "by_idea", "by_reviewer"):
        envelope = report[test]
        # no field of the envelope claims a correction the plan did not make
        assert "correction" not in envelope and "n_corrected" not in envelope
        assert envelope["published"]["correction"] == "bonferroni"  # labelled as the paper's
        assert envelope["planned"]["method"] == "bh" and envelope["planned"]["alpha"] == 0.05
        assert envelope["planned"]["alternatives"] == [alternative]
        for c in envelope["comparisons"]:
            assert "p" not in c and "p_bonferroni" not in c
            planned = c["family"] != ""
            assert c["reject"] == (c["p_adjusted"] <= 0.05 if planned else None)

    html = (out / "report.html").read_text()
    note = re.search(r'<p class="note" id="tests-voice">(.*?)</p>', html, re.S).group(1)
    assert "one-sided" in note and "Benjamini–Hochberg" in note
    assert "Bonferroni over the 7 metrics. *" not in html
    assert "Si et al. convention: two-sided, Bonferroni × 7" in html
    escaped = direction.replace("<", "&lt;").replace(">", "&gt;")
    caption = f"The analysis plan: one-sided ({escaped}); Benjamini–Hochberg; α = 0.05"
    assert html.count(caption) == 4  # each of Tests 1-3, and the with/without table
    # the interval beside a one-sided test is the usual two-sided one, and says so
    assert html.count("<th>95% CI (two-sided)</th>") == 3
    with_without = html[html.index('<table id="quality-with-without">') :]
    with_without = with_without[: with_without.index("</thead>")]
    assert caption in with_without and "p adj. (all)" in with_without
    table_rows = _planned_rows(html)
    assert len(table_rows) == 3 * len(ALL)
    expected = {}
    for test in ("by_review", "by_idea", "by_reviewer"):
        raw = []
        for m in FIVE:
            if test == "by_reviewer":
                p_less = _by_reviewer_p(rows, m)
            else:
                p_less = _expected(rows, "bh", test)[m][0]
            raw.append(p_less if alternative == "less" else 1 - p_less)
        for m, q in zip(FIVE, multipletests(raw, method="fdr_bh")[1], strict=True):
            expected.setdefault(m, []).append(q)
    starred = 0
    bonferroni_small = 0
    for cells in table_rows:
        metric, adj_cell, two_sided, bonf = cells[0], cells[12], cells[13], cells[14]
        assert "*" not in two_sided and "*" not in bonf  # the paper's columns carry no stars
        if metric not in FIVE:
            assert adj_cell.startswith("–")  # exploratory: no adjusted p, no star
            continue
        q = expected[metric].pop(0)
        stars = "***" if q <= 0.001 else "**" if q <= 0.01 else "*" if q <= 0.05 else ""
        assert adj_cell == pval(q) + stars, (metric, adj_cell, q)
        starred += bool(stars)
        bonferroni_small += float(bonf) < 0.05
    if alternative == "greater":
        assert starred == 0 and bonferroni_small > 0  # old stars would have misled here
    else:
        assert starred > 0

    with (out / "by_idea.csv").open() as fh:
        header = next(csv.reader(fh))
    assert {"p_two_sided", "p_two_sided_bonferroni", "p_adjusted", "reject"} <= set(header)
    assert "p_bonferroni" not in header and "p" not in header


def test_under_the_default_plan_the_report_keeps_the_published_wording(exec_study, tmp_path):
    study, _ = exec_study
    out = tmp_path / "report"
    report = report_build(study=study, out_dir=out, options=OPTIONS).data
    html = (out / "report.html").read_text()
    assert report["plan"]["voice"]["default"] is True
    assert (
        "(Test 3); two-sided; Bonferroni over the 7 metrics. * p &lt; 0.05, ** p &lt; 0.01, "
        "*** p &lt; 0.001 after correction." in html
    )
    assert 'class="planned-tests"' not in html
    assert "(two-sided)</th>" not in html and "The analysis plan:" not in html
    assert report["by_review"]["published"]["n_corrected"] == 7
    assert report["by_review"]["planned"]["method"] == "bonferroni"


def test_a_report_states_the_chance_rankings_its_plan_asks_for(exec_study, tmp_path):
    study, _ = exec_study
    study_plan_set(
        study=study, source=json.dumps({"agreement": {"chance_rankings": 300}}), actor=None
    )
    out = tmp_path / "report"
    agreement = report_build(study=study, out_dir=out, options=OPTIONS).data["agreement"]
    assert agreement["options"]["chance_rankings"] == 300
    assert {c["n_rankings"] for c in agreement["chance"].values()} == {300}
    html = (out / "report.html").read_text()
    assert "chance is read from 300 random rankings" in html
    assert "over 300 independent uniformly random rankings" in html
