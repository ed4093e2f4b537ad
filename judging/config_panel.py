"""A judge's reliability panel: the figures of one judge config pooled over its finished
runs in one study (docs/judge-reliability.md, "A judge's own panel").

A config belongs to a study's team, or is the administrator's and usable by every team;
either way its panel is a study's: only the runs of that study are read, so a team never
sees figures from another team's runs of a shared judge. The config's own answers are
read wherever it sat: as the run's judge (seat 0) or as a panel member (its seat).

- Scores (direct and absolute runs): per method and metric, the judge's score of an idea
  is the mean over its runs of its mean of parseable samples in each; its agreement with
  the reviewers' mean (Spearman, Kendall, Pearson, the run panel's `panel_agreement`) and
  its calibration (`calibration`), with bootstrap intervals over ideas.
- Pairwise verdicts (pairwise runs): its own verdicts from every run together give each
  idea a 1–5 pairwise score (agreement with the reviewers' overall mean, as above) and a
  preference per pair (accuracy on the reviewers' pair ratings, vertex bootstrap), and
  its self-preference on mixed pairs.
- Repetition stability: the repeated prompts of every run it judged alone.
"""

from __future__ import annotations

import hashlib
import io
import math
from collections import defaultdict
from collections.abc import Hashable
from typing import Any

from django.core.cache import cache
from django.db.models import Count, Max, Q

from llm.models import JudgeConfig
from studies import csvsafe
from studies.models import PairJudgment, Review, Study
from studies.selectors import reviewer_means_by_idea

from .methods.pairwise import summarise_pairwise
from .methods.panel import MEASURES, member_means, pair_preferences, panel_agreement
from .methods.registry import method_spec
from .methods.reliability import Estimate, calibration
from .models import JudgeRun, Judgment, PairwiseOutcome, PanelMember
from .panel_agreement import (
    MEASURE_LABELS,
    PAIR_MEASURE_LABELS,
    pair_accuracy_blocks,
    pair_accuracy_rows,
    reviewer_pair_ratings,
)
from .reliability_panel import (
    PANEL_BOOT,
    pair_repeat_answers,
    pair_repetition_rows,
    score_repeat_groups,
    score_repetition_rows,
    self_preference_figures,
    style_blocks,
)
from .services.base import pair_call

_SCORED = (JudgeRun.Method.DIRECT, JudgeRun.Method.ABSOLUTE)
_CACHE_VERSION = 3


def config_runs(study: Study, config: JudgeConfig) -> list[tuple[JudgeRun, int]]:
    """The config's finished runs in `study` with the seat it sat at (0: the run's judge),
    oldest first."""
    runs = (
        JudgeRun.objects.filter(study=study, status=JudgeRun.Status.DONE)
        .filter(Q(config=config) | Q(panel_members__config=config))
        .distinct()
        .order_by("pk")
    )
    seats = dict(
        PanelMember.objects.filter(run__study=study, config=config).values_list("run_id", "seat")
    )
    return [(run, 0 if run.config_id == config.pk else seats[run.pk]) for run in runs]


def config_reliability(
    study: Study, config: JudgeConfig, *, n_boot: int = PANEL_BOOT
) -> dict[str, Any]:
    """The config's panel in `study` (module text), cached until one of its runs, a
    condition's generating model, or the reviewers' reviews and pair ratings change."""
    runs = config_runs(study, config)
    state = repr(
        (
            [(r.pk, seat, r.finished_at, r.done_calls) for r, seat in runs],
            sorted(study.conditions.values_list("key", "generating_model")),
            config.resolved_model(),
            Review.objects.filter(study=study).aggregate(n=Count("pk"), last=Max("pk")),
            PairJudgment.objects.filter(task__study=study).aggregate(n=Count("pk"), last=Max("pk")),
        )
    )
    digest = hashlib.sha256(state.encode()).hexdigest()[:16]
    key = f"judging:config-reliability:{_CACHE_VERSION}:{study.pk}:{config.pk}:{n_boot}:{digest}"
    panel = cache.get(key)
    if panel is None:
        panel = _compute(study, config, runs, n_boot)
        cache.set(key, panel, timeout=24 * 3600)
    return panel


def _compute(
    study: Study, config: JudgeConfig, runs: list[tuple[JudgeRun, int]], n_boot: int
) -> dict[str, Any]:
    seed = config.pk
    human = reviewer_means_by_idea(study)
    scored = [(r, seat) for r, seat in runs if r.method in _SCORED]
    paired = [(r, seat) for r, seat in runs if r.method == JudgeRun.Method.PAIRWISE]
    agreement, calibrations = _score_figures(scored, human, n_boot, seed)
    verdicts = [o for r, seat in paired for o in PairwiseOutcome.objects.filter(run=r, member=seat)]
    if verdicts:
        calls = [pair_call(o) for o in verdicts]
        pair_scores = {i: v for i, v in summarise_pairwise(calls).scores.items() if v is not None}
        # The form metric pairwise ratings stand for, as on the run panel.
        metric = method_spec("pairwise").rating_metrics.get("pairwise", "overall")
        agreement.append(_agreement("pairwise", metric, human, pair_scores, n_boot, seed))
    prefs = pair_preferences((o.dimension, o.idea_a_id, o.idea_b_id, o.verdict) for o in verdicts)
    games = [(o.idea_a_id, o.idea_b_id, o.first_shown_id, o.verdict, o.dimension) for o in verdicts]
    name = config.name
    panel: dict[str, Any] = {
        "runs": [
            {"id": r.pk, "method": r.method, "label": r.method_label, "seat": seat}
            for r, seat in runs
        ],
        "n_boot": n_boot,
        "measures": [{"key": m, "label": MEASURE_LABELS[m]} for m in MEASURES],
        "pair_measures": [{"key": m, "label": label} for m, label in PAIR_MEASURE_LABELS.items()],
        "agreement": agreement,
        "calibration": calibrations,
        "pair_accuracy": pair_accuracy_blocks(
            reviewer_pair_ratings(study), {name: prefs}, None, n_boot=n_boot, seed=seed
        )
        if prefs
        else [],
        "self_preference": self_preference_figures(
            study, config.resolved_model(), games, n_boot=n_boot, seed=seed
        )
        if games
        else {},
        "repetition": _repetition(study, runs, n_boot, seed),
        # Every pairwise game of this judge, from all its runs: one design of pairs.
        "style": style_blocks(study, games, _text_source(paired), n_boot=n_boot, seed=seed)
        if games
        else [],
    }
    panel["not_measured"] = _not_measured(panel, runs)
    return panel


def _text_source(runs: list[tuple[JudgeRun, int]]) -> str:
    """The text whose style the covariates read: the one the runs judged, normalised
    unless every run judged another."""
    sources = {(r.params or {}).get("text", "normalized") for r, _seat in runs}
    return sources.pop() if len(sources) == 1 else "normalized"


def _score_figures(
    scored: list[tuple[JudgeRun, int]], human: dict[str, dict[int, float]], n_boot: int, seed: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Agreement and calibration per (method, metric) of the judge's pooled scores."""
    per_run: dict[tuple[str, str], dict[Hashable, list[float]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for run, seat in scored:
        rows: dict[str, list[tuple[Hashable, int, float | None]]] = defaultdict(list)
        for idea_id, metric, sample, score in Judgment.objects.filter(
            run=run, member=seat
        ).values_list("idea_id", "metric", "sample", "score"):
            rows[metric].append((idea_id, sample, score))
        for metric, samples in rows.items():
            for idea, mean in member_means(samples).items():
                per_run[(str(run.method), metric)][idea].append(mean)
    agreement, calibrations = [], []
    for (method, metric), by_idea in sorted(per_run.items()):
        scores = {i: sum(v) / len(v) for i, v in by_idea.items()}
        agreement.append(_agreement(method, metric, human, scores, n_boot, seed))
        h: dict[Hashable, float] = {k: v for k, v in human.get(metric, {}).items()}
        both: dict[Hashable, float] = {i: scores[i] for i in scores if i in h}
        if len(both) < 3:
            continue
        fit = calibration(both, {i: h[i] for i in both}, n_boot=n_boot, seed=seed)
        calibrations.append(
            {
                "method": method,
                "metric": metric,
                "n_ideas": fit["n"],
                "slope": _estimate(fit["slope"]),
                "intercept": _estimate(fit["intercept"]),
            }
        )
    return agreement, calibrations


def _estimate(e: Estimate) -> dict[str, Any]:
    """NaN as None, as the run panel's figures are."""
    finite = {k: getattr(e, k) for k in ("value", "low", "high")}
    return {k: (v if math.isfinite(v) else None) for k, v in finite.items()} | {"n": e.n}


def _agreement(
    method: str,
    metric: str,
    human: dict[str, dict[int, float]],
    scores: dict[Any, float],
    n_boot: int,
    seed: int,
) -> dict[str, Any]:
    """The judge's correlation with the reviewers' mean on one method's scores of one
    metric: the run panel's computation with the judge as its only member."""
    result = panel_agreement(human.get(metric, {}), {"judge": scores}, scores, n_boot=n_boot, seed=seed)  # fmt: skip
    return {
        "method": method,
        "metric": metric,
        "n_ideas": result["n_ideas"],
        "cells": [result["measures"][m]["members"]["judge"] for m in MEASURES],
        "measures": {m: result["measures"][m]["members"]["judge"] for m in MEASURES},
    }


def _repetition(
    study: Study, runs: list[tuple[JudgeRun, int]], n_boot: int, seed: int
) -> list[dict[str, Any]]:
    """Repeated prompts of the runs it judged alone (a panel run asks nothing twice), each
    prompt keyed by its run too: two runs' identical prompts are two prompts."""
    alone = [r for r, seat in runs if seat == 0 and (r.params or {}).get("repeat_share")]
    answers: dict[Hashable, list[Hashable | None]] = {}
    dims: set[str] = set()
    by_metric: dict[str, dict[Hashable, list[float | None]]] = defaultdict(dict)
    for run in alone:
        if run.method == JudgeRun.Method.PAIRWISE:
            answers.update({(run.pk, k): v for k, v in pair_repeat_answers(run).items()})
            dims |= set(PairwiseOutcome.objects.filter(run=run).values_list("dimension", flat=True))
        elif run.method in _SCORED:
            for metric, groups in score_repeat_groups(run).items():
                by_metric[f"{run.method}: {metric}"].update(
                    {(run.pk, k): v for k, v in groups.items()}
                )
    rows = pair_repetition_rows(answers, study, dims, n_boot=n_boot, seed=seed)
    for label, groups in sorted(by_metric.items()):
        metric = label.split(": ", 1)[1]
        for row in score_repetition_rows({metric: groups}, study, n_boot=n_boot, seed=seed):
            rows.append({**row, "metric": label})
    return rows


def _not_measured(panel: dict[str, Any], runs: list[tuple[JudgeRun, int]]) -> list[str]:
    out = []
    if not runs:
        out.append("every figure: this judge has no finished run in this study")
        return out
    if not panel["repetition"]:
        out.append("repetition stability: no run of this judge alone asked prompts again")
    if not panel["pair_accuracy"]:
        out.append("accuracy on pair ratings: no pairwise run of this judge")
    sp = panel["self_preference"]
    if "skipped" in sp:
        out.append(f"self-preference: {sp['skipped']}")
    elif not sp:
        out.append("self-preference: no pairwise run of this judge")
    if not panel["style"]:
        out.append(
            "conditions' Bradley–Terry ratings, raw and style-controlled: no pairwise games "
            "of this judge between ideas of different conditions"
        )
    return out


def config_reliability_rows(panel: dict[str, Any]) -> list[dict[str, Any]]:
    """The config's panel as one row per figure: {figure, source (the runs' method),
    on (metric or dimension), item, judge {value, low, high, n}, human {…} (the reviewers'
    figure; null values where there is none)}. The page's CSV and the study report's
    `agreement.judge_configs[].rows` both read these."""
    none: dict[str, Any] = {"value": None, "low": None, "high": None, "n": None}
    rows: list[dict[str, Any]] = []

    def add(figure: str, source: str, on: str, item: str, e: dict[str, Any], h: Any = None):
        judge = {k: e.get(k) for k in ("value", "low", "high", "n")}
        human = {k: h.get(k) for k in ("value", "low", "high", "n")} if h else dict(none)
        rows.append(
            {"figure": figure, "source": source, "on": on, "item": item, "judge": judge,
             "human": human}
        )  # fmt: skip

    for block in panel["agreement"]:
        for measure, est in block["measures"].items():
            add(f"agreement_{measure}", block["method"], block["metric"], "judge", est)
    for block in panel["calibration"]:
        for part in ("slope", "intercept"):
            add("calibration", block["method"], block["metric"], part, block[part])
    for block in panel["pair_accuracy"]:
        for r in pair_accuracy_rows(block):
            add(r["measure"], "pairwise", r["metric"], r["of"], r)
    sp = panel["self_preference"] or {}
    for r in sp.get("rows", []):
        add("self_preference", "pairwise", r["dimension"], sp["judge_family"], r["judge"], r["human"])  # fmt: skip
        add("self_preference_difference", "pairwise", r["dimension"], sp["judge_family"], r["difference"])  # fmt: skip
    for r in panel["repetition"]:
        add("repetition", "", r["metric"], r["figure"], r["judge"], r["human"])
    for block in panel["style"]:
        for r in block.get("ratings", []):
            add("bt_raw", "pairwise", block["dimension"], r["condition"], r["raw"])
            add("bt_style_controlled", "pairwise", block["dimension"], r["condition"], r["style_controlled"])  # fmt: skip
        for b in block.get("beta", []):
            add("style_beta", "pairwise", block["dimension"], b["feature"], b)
    return rows


def config_reliability_csv(panel: dict[str, Any]) -> str:
    """The config's panel, one row per figure, for a spreadsheet."""
    buf = io.StringIO()
    w = csvsafe.writer(buf)
    w.writerow(
        ["figure", "source", "metric_or_dimension", "item", "value", "ci_low", "ci_high", "n",
         "human_value", "human_ci_low", "human_ci_high", "human_n"]
    )  # fmt: skip
    for r in config_reliability_rows(panel):
        e, h = r["judge"], r["human"]
        w.writerow(
            [r["figure"], r["source"], r["on"], r["item"], e["value"], e["low"], e["high"],
             e["n"], h["value"], h["low"], h["high"], h["n"]]
        )  # fmt: skip
    return buf.getvalue()


def config_label(config: JudgeConfig) -> str:
    """The judge as the report names it: its name and the model it asks."""
    model = config.resolved_model()
    return f"{config.name} ({model})" if model else config.name


def study_configs(study: Study) -> list[JudgeConfig]:
    """Every judge config a finished LLM run of `study` used, as its judge or as a panel
    member, by id; the endpoint-less configs of the no-LLM baselines are left out."""
    done = JudgeRun.objects.filter(study=study, status=JudgeRun.Status.DONE).exclude(
        method__in=JudgeRun.BASELINES
    )
    ids = set(done.exclude(config=None).values_list("config_id", flat=True))
    ids |= set(PanelMember.objects.filter(run__in=done).values_list("config_id", flat=True))
    return list(JudgeConfig.objects.filter(pk__in=ids, is_baseline=False).order_by("pk"))


def config_reliability_for_report(
    study: Study, config: JudgeConfig, *, n_boot: int = PANEL_BOOT
) -> dict[str, Any]:
    """The config's panel in `study` for the study report (docs/report-schema.md,
    `agreement.judge_configs`): who it is, the runs it pools, its rows
    (`config_reliability_rows`) and what was not measured. No plots."""
    panel = config_reliability(study, config, n_boot=n_boot)
    return {
        "key": f"config{config.pk}",
        "config_id": config.pk,
        "name": config.name,
        "label": config_label(config),
        "model": config.resolved_model(),
        "shared": config.study_id is None,
        "runs": panel["runs"],
        "rows": config_reliability_rows(panel),
        "not_measured": panel["not_measured"],
        "n_boot": panel["n_boot"],
    }


def study_config_panels(study: Study, *, n_boot: int = PANEL_BOOT) -> list[dict[str, Any]]:
    """`config_reliability_for_report` of every config of `study_configs`."""
    return [config_reliability_for_report(study, c, n_boot=n_boot) for c in study_configs(study)]
