"""Each judge config's reliability panel pooled over its finished runs in the study, in the
study report: report.json's `agreement.judge_configs`, a table per judge in the HTML and
`judge_configs.csv`. The report's figures are the judge page's (`config_reliability`)
computed again directly with the same resamples and seed; the correlation is also
recomputed with scipy from the rows; an installation-wide judge's runs in another study
never enter."""

from __future__ import annotations

import csv
import json
import re
from collections import defaultdict

import numpy as np
import pytest
from django.core.cache import cache
from scipy import stats

from tests.factories import FAST, make_agreement_study, make_direct_run


def _build(study, out):
    from studies.report_files import report_build

    report_build(study=study, out_dir=out, options=FAST)
    return json.loads((out / "report.json").read_text()), (out / "report.html").read_text()


def _entry(report, config):
    (entry,) = [c for c in report["agreement"]["judge_configs"] if c["config_id"] == config.pk]
    return entry


def _direct_rows(study, config):
    """The judge page's panel computed afresh (the report's is cached under the same key)."""
    from judging.config_panel import config_reliability, config_reliability_rows

    cache.clear()
    panel = config_reliability(study, config, n_boot=FAST.panel_bootstrap)
    # report.json is JSON: compare through the same round trip.
    return panel, json.loads(json.dumps(config_reliability_rows(panel)))


def _pooled_spearman(study, runs, metric="overall"):
    """Spearman's ρ of the judge's per-idea mean over `runs` with the reviewers' means."""
    from judging.models import Judgment
    from studies.models import ReviewScore

    judge, human = defaultdict(list), defaultdict(list)
    for idea, score in Judgment.objects.filter(run__in=runs, metric=metric).values_list(
        "idea_id", "score"
    ):
        judge[idea].append(score)
    for idea, score in ReviewScore.objects.filter(review__study=study, metric=metric).values_list(
        "review__idea_id", "score"
    ):
        human[idea].append(score)
    ideas = sorted(set(judge) & set(human))
    a = [float(np.mean(judge[i])) for i in ideas]
    b = [float(np.mean(human[i])) for i in ideas]
    return stats.spearmanr(a, b).statistic, len(ideas)


@pytest.mark.slow  # a report
@pytest.mark.django_db
def test_the_report_carries_each_judges_pooled_panel(owner, tmp_path, settings):
    settings.REPORTS_ROOT = tmp_path
    seeded = make_agreement_study(owner)
    study, scorer = seeded.study, seeded.direct.config
    second = make_direct_run(seeded, scorer, noise=1.5, seed=3)
    report, html = _build(study, tmp_path / "rep")

    configs = report["agreement"]["judge_configs"]
    # Both judges of the study, by id: the scorer (two direct runs) and the pairwise judge.
    assert [c["config_id"] for c in configs] == sorted([scorer.pk, seeded.pairwise.config.pk])
    entry = _entry(report, scorer)
    assert entry["key"] == f"config{scorer.pk}" and entry["name"] == "scorer-llm"
    assert entry["label"] == "scorer-llm (test-scorer-1)" and entry["shared"] is False
    assert [r["id"] for r in entry["runs"]] == [seeded.direct.pk, second.pk]
    assert entry["n_boot"] == FAST.panel_bootstrap

    panel, rows = _direct_rows(study, scorer)
    assert entry["rows"] == rows and entry["not_measured"] == panel["not_measured"]
    spearman = {r["on"]: r for r in entry["rows"] if r["figure"] == "agreement_spearman"}
    rho, n = _pooled_spearman(study, [seeded.direct, second])
    assert spearman["overall"]["judge"]["value"] == pytest.approx(rho)
    assert spearman["overall"]["judge"]["n"] == n
    low, high = spearman["overall"]["judge"]["low"], spearman["overall"]["judge"]["high"]
    assert low < rho < high
    assert {r["figure"] for r in entry["rows"]} >= {"agreement_pearson", "calibration"}
    # The pairwise judge: its accuracy on the reviewers' pair ratings, beside theirs.
    pair = _entry(report, seeded.pairwise.config)
    assert pair["rows"] == _direct_rows(study, seeded.pairwise.config)[1]
    assert any(r["item"] == "reviewers, one against another" for r in pair["rows"])

    # The HTML: a table per judge under the agreement section, its caption, definitions.
    agreement = html[html.index('id="agreement"') : html.index('id="topics"')]
    assert f'id="judge-config-config{scorer.pk}"' in agreement
    assert f'id="judge-config-config{seeded.pairwise.config.pk}"' in agreement
    table = agreement[agreement.index(f'id="judge-config-config{scorer.pk}"') :]
    table = table[: table.index("</table>")]
    assert "figures pool this judge's 2 finished runs in this study" in table
    assert f"{seeded.direct.pk} direct, {second.pk} direct" in table
    assert f"{FAST.panel_bootstrap} resamples" in table
    assert f"<td>{spearman['overall']['judge']['value']:.3f}</td>" in table
    definitions = agreement[agreement.index('id="judge-config-definitions"') :]
    definitions = definitions[: definitions.index("</dl>")]
    for figure in ("agreement_spearman", "calibration", "pair_accuracy_with_ties", "repetition"):
        assert figure in definitions
    assert "href" not in definitions and "http" not in definitions

    # The CSV: the same rows, one per figure.
    assert "judge_configs.csv" in report["files"]["csv"]
    with (tmp_path / "rep" / "judge_configs.csv").open() as fh:
        table_rows = [r for r in csv.DictReader(fh) if r["config_id"] == str(scorer.pk)]
    assert len(table_rows) == len(entry["rows"])
    for got, want in zip(table_rows, entry["rows"], strict=True):
        assert (got["figure"], got["source"], got["on"], got["item"]) == (
            want["figure"], want["source"], want["on"], want["item"],
        )  # fmt: skip
        assert float(got["value"]) == pytest.approx(want["judge"]["value"])
        assert got["n_runs"] == "2" and got["n_boot"] == str(FAST.panel_bootstrap)


@pytest.mark.slow  # two reports' worth of data, one report
@pytest.mark.django_db
def test_another_studys_runs_of_a_shared_judge_do_not_enter_the_report(
    owner, other_researcher, tmp_path, settings
):
    """The administrator's judge, usable by every study, is run in two teams' studies; the
    other team's run disagrees with everything, so pooling it would move every figure."""
    from llm.models import JudgeConfig

    settings.REPORTS_ROOT = tmp_path
    ours = make_agreement_study(owner, slug="ours")
    theirs = make_agreement_study(other_researcher, slug="theirs")
    shared = JudgeConfig.objects.create(name="shared-llm", base_url="http://127.0.0.1:9/v1", model="shared-1")  # fmt: skip
    mine = make_direct_run(ours, shared, noise=1.0, seed=5)
    their_run = make_direct_run(theirs, shared, noise=25.0, seed=6)
    report, html = _build(ours.study, tmp_path / "rep")

    entry = _entry(report, shared)
    assert entry["shared"] is True and [r["id"] for r in entry["runs"]] == [mine.pk]
    assert entry["rows"] == _direct_rows(ours.study, shared)[1]
    rho, n = _pooled_spearman(ours.study, [mine])
    (spearman,) = [
        r for r in entry["rows"] if r["figure"] == "agreement_spearman" and r["on"] == "overall"
    ]
    assert spearman["judge"]["value"] == pytest.approx(rho) and spearman["judge"]["n"] == n
    # Their team's judges are not ours to report.
    ids = {c["config_id"] for c in report["agreement"]["judge_configs"]}
    assert theirs.direct.config.pk not in ids and theirs.pairwise.config.pk not in ids
    _, their_rows = _direct_rows(theirs.study, shared)
    (their_rho,) = [
        r for r in their_rows if r["figure"] == "agreement_spearman" and r["on"] == "overall"
    ]
    assert their_rho["judge"]["value"] != pytest.approx(rho, abs=1e-3)
    table = html[html.index(f'id="judge-config-config{shared.pk}"') :]
    table = table[: table.index("</table>")]
    assert re.search(rf"\b{mine.pk} direct\b", table)
    assert not re.search(rf"\b{their_run.pk} direct\b", table)
    assert f"{their_rho['judge']['value']:.3f}" not in table


def test_the_judge_configs_table_reads_report_json():
    """`judge_tables` turns `agreement.judge_configs` into `judge_configs` rows; a report
    without judge configs gets no such table."""
    from studies.judge_tables import JUDGE_CONFIG_COLUMNS, judge_tables

    est = {"value": 0.5, "low": 0.25, "high": 0.75, "n": 12}
    none = {"value": None, "low": None, "high": None, "n": None}
    report = {
        "agreement": {
            "judges": [],
            "judge_configs": [
                {
                    "key": "config7", "config_id": 7, "name": "j", "runs": [{"id": 1}, {"id": 2}],
                    "n_boot": 50,
                    "rows": [
                        {"figure": "calibration", "source": "direct", "on": "overall",
                         "item": "slope", "judge": est, "human": none},
                        {"figure": "repetition", "source": "", "on": "pairwise",
                         "item": "identical verdicts", "judge": est, "human": est},
                    ],
                }
            ],
        }
    }  # fmt: skip
    frame = judge_tables(report)["judge_configs"]
    assert list(frame.columns) == JUDGE_CONFIG_COLUMNS
    assert frame["judge"].tolist() == ["config7", "config7"]
    assert frame["value"].tolist() == [0.5, 0.5] and frame["n_runs"].tolist() == [2, 2]
    assert frame["human_value"].isna().tolist() == [True, False]
    assert "judge_configs" not in judge_tables({"agreement": {"judges": [], "judge_configs": []}})


def test_without_a_ratings_provider_the_report_has_no_judge_panels(monkeypatch):
    """The report asks the registered ratings provider (`JudgeRatingsProvider`) for the
    config panels; judging's registered provider answers, and with none there are none."""
    from judging.apps import RATINGS_ON_USE
    from studies import report_files
    from studies.judge_ratings import judge_ratings_provider
    from studies.report_files import judge_config_panels

    assert judge_ratings_provider() is RATINGS_ON_USE and callable(RATINGS_ON_USE.config_panels)
    monkeypatch.setattr(report_files, "judge_ratings_provider", lambda: None)
    assert judge_config_panels(None, FAST) == []  # type: ignore[arg-type]
