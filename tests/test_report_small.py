"""Display of small studies' reports: what the report leaves out or warns about when there
are too few reviews for a figure or for the Wald p-values of the mixed models."""

from __future__ import annotations

import json

import pytest

from tests.factories import FAST, make_agreement_study


def _table(report, tid):
    return next(t for t in report["agreement"]["tables"] if t["id"] == tid)


@pytest.mark.figures
def test_a_consistency_table_with_no_value_has_no_figure_and_says_why(
    db, owner, tmp_path, settings
):
    from studies.models import Review
    from studies.report_files import report_build

    settings.REPORTS_ROOT = tmp_path
    seeded = make_agreement_study(owner, n_per_cell=3)
    first = {}
    for review in Review.objects.filter(study=seeded.study).order_by("pk"):
        first.setdefault(review.idea_id, review.pk)
    Review.objects.filter(study=seeded.study).exclude(pk__in=first.values()).delete()
    report_build(study=seeded.study, out_dir=tmp_path / "rep", options=FAST)
    report = json.loads((tmp_path / "rep" / "report.json").read_text())
    cells = [c for r in _table(report, "consistency")["rows"] for c in r["cells"].values()]
    assert cells and all(c["value"] is None for c in cells)
    html = (tmp_path / "rep" / "report.html").read_text()
    assert 'class="agreement-bars"' not in html  # an empty chart with only its chance line
    assert 'id="agreement-unplotted-consistency"' in html
    assert "There is no figure: no balanced accuracy could be computed" in html


def test_a_small_studys_mixed_model_table_says_the_wald_p_is_optimistic(
    db, owner, tmp_path, settings
):
    from studies.report_files import report_build

    settings.REPORTS_ROOT = tmp_path
    seeded = make_agreement_study(owner, n_per_cell=2)
    report_build(study=seeded.study, out_dir=tmp_path / "rep", options=FAST)
    report = json.loads((tmp_path / "rep" / "report.json").read_text())
    fit = report["mixed_effects"]["fits"]["overall"]
    ai = next(r for r in fit["fixed"] if r["term"] == "condition[AI]")
    assert ai["df"] < 30 and "Wald p-values are optimistic" in fit["wald_caution"]
    html = (tmp_path / "rep" / "report.html").read_text()
    assert html.count('class="note wald-caution"') == len(report["metrics"])
