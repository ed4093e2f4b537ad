"""The agreement section of the report on a small seeded study with two judge runs made
directly in the database: a direct-scoring judge and a pairwise judge, beside reviewer
pair ratings."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import pytest

from judging.models import IdeaRating, JudgeConfig, JudgeRun, Judgment, LLMCall, PairwiseOutcome
from studies.analysis.report import ReportOptions
from studies.models import (
    Condition,
    Idea,
    IdeaCondition,
    PairJudgment,
    PairTask,
    Review,
    Reviewer,
    ReviewScore,
    Study,
    Topic,
)

FAST = ReportOptions(
    consistency_splits=100,
    consistency_bootstrap=100,
    consistency_permutations=100,
    mixed_starts=1,
    mixed_engine="sparse",
    agreement_splits=100,
    agreement_bootstrap=100,
    agreement_permutations=100,
)
SECRET_NAMES = ["Alice Quartermain", "Bob Zebulon", "Carla Nightingale", "Dev Okonkwo"]
SECRET_INSTITUTIONS = ["Grand Fenwick Institute", "Ruritania University"]


@dataclass
class Seeded:
    study: Study
    ideas: list[Idea]
    quality: dict[int, float]
    direct: JudgeRun
    pairwise: JudgeRun


def make_agreement_study(owner, slug: str = "agree", n_per_cell: int = 8) -> Seeded:
    """Two topics x two conditions x `n_per_cell` ideas, 8 named reviewers from named
    institutions, 4 reviews per idea, pair ratings, and two finished judge runs."""
    from studies.services import study_create

    rng = random.Random(7)
    study = study_create(
        owner=owner, slug=slug, title="Agreement study", baseline_condition="Human"
    )
    metrics = study.form_definition().metric_keys
    conds = {
        key: Condition.objects.create(study=study, key=key, kind=kind)
        for key, kind in (("Human", "human"), ("AI", "ai"))
    }
    topics = [Topic.objects.create(study=study, name=n) for n in ("Bias", "Factuality")]
    reviewers = [
        Reviewer.objects.create(
            study=study,
            pseudonym=f"R{i + 1:03d}",
            name=SECRET_NAMES[i % 4] + f" {i}",
            email=f"rev{i}@example.org",
            institution=SECRET_INSTITUTIONS[i % 2],
            external_id=f"orcid-0000-{i:04d}",
        )
        for i in range(8)
    ]
    ideas: list[Idea] = []
    quality: dict[int, float] = {}
    for topic in topics:
        for cond_key, cond in conds.items():
            for k in range(n_per_cell):
                q = rng.gauss(5.5 if cond_key == "AI" else 5.0, 1.6)
                words = " ".join(["method"] * rng.randint(80, 400))
                idea = Idea.objects.create(
                    study=study,
                    topic=topic,
                    title=f"Idea {topic.name} {k}",
                    raw_text=f"By {SECRET_NAMES[k % 4]}. {words}",
                    normalized_text=f"Title: idea. {words}",
                    normalization_status=Idea.NormalizationStatus.APPROVED,
                    author_institution=SECRET_INSTITUTIONS[k % 2],
                )
                IdeaCondition.objects.create(
                    idea=idea,
                    condition=cond,
                    study=study,
                    external_id=f"{topic.name}_{k}_{cond_key}",
                )
                ideas.append(idea)
                quality[idea.pk] = q
    for idea in ideas:
        for reviewer in rng.sample(reviewers, 4):
            review = Review.objects.create(
                study=study,
                idea=idea,
                reviewer=reviewer,
                familiarity=rng.randint(1, 5),
                confidence=rng.randint(1, 5),
                minutes=rng.choice([20.0, 30.0, 45.0]),
            )
            ReviewScore.objects.bulk_create(
                [
                    ReviewScore(
                        review=review,
                        metric=m,
                        score=float(min(10, max(1, round(quality[idea.pk] + rng.gauss(0, 1.2))))),
                        rationale="clear enough",
                    )
                    for m in metrics
                ]
            )
    # Reviewer pair ratings: pairs within a topic, each rated by two reviewers.
    by_topic: dict[int, list[Idea]] = {}
    for idea in ideas:
        by_topic.setdefault(idea.topic_id, []).append(idea)
    rated = []
    for members in by_topic.values():
        for _ in range(8):
            a, b = rng.sample(members, 2)
            if (a.pk, b.pk) in rated or (b.pk, a.pk) in rated:
                continue
            rated.append((a.pk, b.pk))
            for reviewer in rng.sample(reviewers, 2):
                left = rng.random() < 0.5
                task = PairTask.objects.create(
                    study=study,
                    reviewer=reviewer,
                    idea_a=a,
                    idea_b=b,
                    a_on_left=left,
                    dimensions=["overall"],
                    status=PairTask.Status.SUBMITTED,
                )
                diff = quality[a.pk] - quality[b.pk] + rng.gauss(0, 1.0)
                winner = "tie" if abs(diff) < 0.3 else ("a" if diff > 0 else "b")
                choice = (
                    "tie" if winner == "tie" else ("first" if (winner == "a") == left else "second")
                )
                PairJudgment.objects.create(
                    task=task, dimension="overall", choice=choice, winner=winner
                )

    config = JudgeConfig.objects.create(
        name="scorer-llm",
        base_url="http://127.0.0.1:9/v1",
        model="test-scorer-1",
        parameters={"temperature": 0.0},
        price_input_per_million=Decimal("1.0"),
    )
    direct = JudgeRun.objects.create(
        study=study,
        config=config,
        method=JudgeRun.Method.DIRECT,
        status=JudgeRun.Status.DONE,
        params={"samples": 1, "text": "normalized"},
        cost=Decimal("0.048"),
    )
    for idea in ideas:
        call = LLMCall.objects.create(
            cache_key=f"direct-{idea.pk}",
            config=config,
            run=direct,
            base_url=config.base_url,
            model=config.model,
            request={"model": config.model, "messages": [{"role": "user", "content": "score"}]},
            response_text='{"overall": 5}',
            prompt_version="direct_scoring@1",
            prompt_hash="0" * 64,
            input_tokens=1000,
            output_tokens=50,
            cost=Decimal("0.0015"),
        )
        for m in metrics:
            Judgment.objects.create(
                run=direct,
                idea=idea,
                metric=m,
                call=call,
                score=float(min(10, max(1, round(quality[idea.pk] + rng.gauss(0, 0.8))))),
            )
    pair_cfg = JudgeConfig.objects.create(
        name="pair-llm", base_url="http://127.0.0.1:9/v1", model="test-pair-1"
    )
    pairwise = JudgeRun.objects.create(
        study=study,
        config=pair_cfg,
        method=JudgeRun.Method.PAIRWISE,
        status=JudgeRun.Status.DONE,
        params={"text": "normalized"},
    )
    sums: dict[int, int] = {i.pk: 0 for i in ideas}
    for members in by_topic.values():
        for i, a in enumerate(members):
            for b in members[i + 1 :]:
                for first in (a, b):
                    diff = quality[a.pk] - quality[b.pk] + rng.gauss(0, 1.0)
                    verdict = "A" if diff > 0 else "B"
                    if rng.random() < 0.1:  # a position bias
                        verdict = "A" if first == a else "B"
                    PairwiseOutcome.objects.create(
                        run=pairwise, idea_a=a, idea_b=b, first_shown=first, verdict=verdict
                    )
                    sums[a.pk] += 1 if verdict == "A" else -1
                    sums[b.pk] += 1 if verdict == "B" else -1
    IdeaRating.objects.bulk_create(
        [
            IdeaRating(run=pairwise, idea_id=pk, dimension="pairwise", score=float(s))
            for pk, s in sums.items()
        ]
    )
    return Seeded(study, ideas, quality, direct, pairwise)


@pytest.fixture
def agreement_report(db, owner, tmp_path, settings):
    from studies.reporting import report_build

    settings.REPORTS_ROOT = tmp_path
    seeded = make_agreement_study(owner)
    snap = report_build(study=seeded.study, out_dir=tmp_path / "rep", options=FAST)
    return seeded, Path(snap.directory), snap


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
    assert 'class="agreement-confusion"' in html
    assert "Human ceiling (human–human)" in html
    csv_text = (out / "agreement.csv").read_text()
    assert "ceiling" in csv_text and f"run{seeded.direct.pk}" in csv_text
