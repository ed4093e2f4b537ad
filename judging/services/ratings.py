"""The judge ratings studies' report asks for (`studies.judge_ratings`), filled from the
runs' rows. Registered as the provider when the judging app starts.

How a run's outputs become agreement inputs is its method's registry entry: methods that
score the form (`SCORES`) give their Judgment rows, one per sample (NaN = unparseable,
the cost of each call the run paid for counted once); methods that rank (`RATINGS`) give
their per-idea ratings mapped onto form metrics and their pairwise outcomes; methods
that judge something other than the study's ideas (`NONE`) are left out.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Sequence
from typing import Any

import pandas as pd

from studies.analysis.options import ReportOptions
from studies.analysis.report import JudgeData
from studies.models import Study
from studies.selectors import human_pair_frame, idea_labels, idea_lengths

from ..methods.alignment import preferences_from_scores
from ..methods.panel import member_means, panel_scores
from ..methods.registry import BASELINE_METHODS, METHODS, NONE, SCORES, method_spec
from ..models import IdeaRating, JudgeRun, Judgment, PairwiseOutcome
from ..panel_agreement import member_labels
from .base import JudgeRunRefused, panel_outcomes
from .runs import judge_run_plan


def _score_rows(run: JudgeRun, labels: dict[int, str]) -> pd.DataFrame:
    # One call scores every metric of an idea: its cost is counted once.
    seen: set[int] = set()
    rows = []
    for member, idea_id, metric, score, sample, call_id, cost, call_run in Judgment.objects.filter(
        run=run
    ).values_list(
        "member", "idea_id", "metric", "score", "sample", "call_id", "call__cost", "call__run_id"
    ):
        paid = cost is not None and call_run == run.pk and call_id not in seen
        if call_id is not None:
            seen.add(call_id)
        rows.append(
            {
                "idea_id": labels.get(idea_id),
                "metric": metric,
                "score": float("nan") if score is None else score,
                "sample": sample,
                "cost": float(cost) if paid else 0.0,
                "member": member,
            }
        )
    if len({r["member"] for r in rows}) > 1:
        rows = _panel_rows(rows)
    return pd.DataFrame(rows, columns=["idea_id", "metric", "score", "sample", "cost"])


def _panel_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A panel run as one judge: per idea and metric the panel's score (the mean of its
    members' means, judging.methods.panel) and the cost of every member's calls; NaN
    where no member gave a parseable score."""
    by_member: dict[int, list[tuple[Hashable, Hashable, float | None]]] = defaultdict(list)
    cost: dict[tuple[Any, str], float] = defaultdict(float)
    for r in rows:
        key = (r["idea_id"], r["metric"])
        score = None if math.isnan(r["score"]) else r["score"]
        by_member[r["member"]].append((key, r["sample"], score))
        cost[key] += r["cost"]
    combined = panel_scores({m: member_means(v) for m, v in by_member.items()})
    return [
        {
            "idea_id": idea,
            "metric": metric,
            "score": combined.get((idea, metric), math.nan),
            "sample": 0,
            "cost": total,
        }
        for (idea, metric), total in cost.items()
    ]


def _rating_rows(run: JudgeRun, labels: dict[int, str], metrics: Sequence[str]) -> pd.DataFrame:
    mapping = method_spec(run.method).rating_metrics
    rows = []
    for idea_id, dim, score in IdeaRating.objects.filter(run=run).values_list(
        "idea_id", "dimension", "score"
    ):
        target = dim if dim in metrics else mapping.get(dim)
        if target is None or target not in metrics:
            continue
        rows.append(
            {
                "idea_id": labels.get(idea_id),
                "metric": target,
                "score": float("nan") if score is None else score,
            }
        )
    return pd.DataFrame(rows, columns=["idea_id", "metric", "score"])


def _pair_rows(run: JudgeRun, labels: dict[int, str]) -> pd.DataFrame | None:
    # A panel's games are its combined verdicts; each carries the cost of its members' calls.
    cost: dict[tuple[Any, ...], float] = defaultdict(float)
    for a, b, f, d, rnd, paid, call_run in PairwiseOutcome.objects.filter(run=run).values_list(
        "idea_a_id",
        "idea_b_id",
        "first_shown_id",
        "dimension",
        "round",
        "call__cost",
        "call__run_id",
    ):
        cost[(a, b, f, d, rnd)] += float(paid) if paid is not None and call_run == run.pk else 0.0
    rows = [
        {
            "idea_a": labels.get(o.idea_a_id),
            "idea_b": labels.get(o.idea_b_id),
            "first_shown": labels.get(o.first_shown_id),
            "verdict": o.verdict,
            "dimension": o.dimension,
            "round": o.round,
            "cost": cost[(o.idea_a_id, o.idea_b_id, o.first_shown_id, o.dimension, o.round)],
        }
        for o in panel_outcomes(run)
    ]
    if not rows:
        return None
    pairs = pd.DataFrame(rows)
    return pairs[pairs["idea_a"].notna() & pairs["idea_b"].notna()].reset_index(drop=True)


def _label(run: JudgeRun) -> str:
    if run.method_is_baseline:
        return f"{run.method_label} (run {run.pk})"
    members = member_labels(run)
    if len(members) > 1:
        return f"panel of {', '.join(members)} · {run.method} (run {run.pk})"
    return f"{run.config.name if run.config else run.method} · {run.method} (run {run.pk})"


def _run_info(run: JudgeRun, panel_bootstrap: int) -> dict[str, Any]:
    info: dict[str, Any] = {
        "run_id": run.pk,
        "params": run.params,
        "cost": float(run.cost),
        "http_calls": run.http_calls,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
    }
    if not run.method_is_baseline:
        from ..run_calls import run_calls

        calls = run_calls(run)
        tokens = calls["tokens"]
        info["tokens"] = {
            k: tokens[k] for k in ("input_tokens", "output_tokens", "reasoning_tokens")
        }
        info["answering_models"] = calls["models"]
        from ..reliability_panel import reliability_for_report, run_reliability

        reliability = reliability_for_report(run, n_boot=panel_bootstrap)
        if reliability is not None:
            info["reliability"] = reliability
        # cached: the same panel
        judge_panel = run_reliability(run, n_boot=panel_bootstrap, plots=False)
        if judge_panel is not None and judge_panel.get("judge_panel"):
            info["panel"] = judge_panel["judge_panel"]
    return info


def judge_data(
    run: JudgeRun,
    study: Study,
    labels: dict[int, str],
    metrics: Sequence[str],
    human_pairs: pd.DataFrame | None = None,
    panel_bootstrap: int = ReportOptions().panel_bootstrap,
) -> JudgeData:
    """One finished run as the agreement module's inputs. A method that never compares
    two of the study's ideas (LigBench) gets, for the pairs reviewers rated, the order of
    its scores as its preference (`judging.methods.alignment`)."""
    model = run.config.resolved_model() if run.config and not run.method_is_baseline else ""
    spec = method_spec(run.method)
    pairs = None
    if spec.agreement == SCORES:
        scores: pd.DataFrame | None = _score_rows(run, labels)
    else:
        scores = _rating_rows(run, labels, metrics)
        if not spec.pairs_from_scores:
            pairs = _pair_rows(run, labels)
        elif human_pairs is not None and scores is not None and not scores.empty:
            derived = preferences_from_scores(scores, human_pairs)
            pairs = derived if not derived.empty else None
    if scores is not None:
        scores = scores[scores["idea_id"].notna()].reset_index(drop=True)
        if scores.empty:
            scores = None
    return JudgeData(
        key=f"run{run.pk}",
        label=_label(run),
        method=str(run.method),
        baseline=run.method_is_baseline,
        model=model,
        judge_scores=scores,
        judge_pairs=pairs,
        lengths=idea_lengths(study, labels, str(run.params.get("text", "normalized"))),
        info=_run_info(run, panel_bootstrap),
    )


class RunRatings:
    """The provider: `studies.judge_ratings.JudgeRatingsProvider` over stored runs."""

    def judge_inputs(
        self, study: Study, metrics: Sequence[str], *, panel_bootstrap: int
    ) -> list[JudgeData]:
        labels = idea_labels(study)
        skipped = [k for k, s in METHODS.items() if s.agreement == NONE]
        runs = (
            JudgeRun.objects.filter(study=study, status=JudgeRun.Status.DONE)
            .exclude(method__in=skipped)
            .select_related("config")
            .order_by("created_at", "pk")
        )
        human = human_pair_frame(study) if runs.exists() else None
        return [
            judge_data(run, study, labels, list(metrics), human, panel_bootstrap) for run in runs
        ]

    def config_panels(self, study: Study, *, panel_bootstrap: int) -> list[dict[str, Any]]:
        """Each judge config's reliability panel pooled over its finished runs in `study`
        (`studies.judge_ratings.JudgeRatingsProvider`; `judging.config_panel`)."""
        from ..config_panel import study_config_panels

        return study_config_panels(study, n_boot=panel_bootstrap)

    def baseline_availability(self, study: Study) -> dict[str, str | None]:
        out: dict[str, str | None] = {}
        for method in sorted(BASELINE_METHODS, key=list(METHODS).index):
            try:
                judge_run_plan(study=study, method=method)
                out[method] = None
            except JudgeRunRefused as exc:  # the report is shared: no idea named
                out[method] = exc.unnamed
        return out


RUN_RATINGS = RunRatings()
