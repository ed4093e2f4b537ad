"""A finished judge run's reliability panel: what its own outcomes can say about the judge
beyond agreement (docs/judge-reliability.md has each figure's definition and reference).

- Direct scores: their calibration against the reviewers' mean score of the same ideas,
  per metric (human mean = a + b·judge score, bootstrap intervals over ideas), with the
  reliability plot.
- Pairwise verdicts: Bradley–Terry ratings of the conditions from the judge's games, raw
  and with style held equal (length, markdown density and list items as covariates, and
  the first-shown position), with vertex-bootstrap intervals over ideas, and each style
  feature's pull.

Repetition stability and self-preference need calls the run did not make (prompts asked
again; conditions that name their generating model): the panel says so rather than
guessing. The statistics are pure (judging/methods/reliability.py); this module reads the
rows, and caches the panel per run, since a finished run does not change.
"""

from __future__ import annotations

import io
import math
from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
from django.core.cache import cache
from django.db.models import Avg

from studies import csvsafe
from studies.models import IdeaCondition, Review, ReviewScore
from studies.selectors import idea_text

from .methods.reliability import (
    STYLE_FEATURES,
    Estimate,
    calibration,
    reliability_plot,
    style_bt_intervals,
    style_features,
)
from .models import JudgeRun, Judgment, PairwiseOutcome

#: Bootstrap resamples of the panel's intervals (seeded by the run's id).
PANEL_BOOT = 400
_SCORED = {JudgeRun.Method.DIRECT, JudgeRun.Method.ABSOLUTE}
_PAIRED = {JudgeRun.Method.PAIRWISE, JudgeRun.Method.SWISS}
_CACHE_VERSION = 1


def _est(e: Estimate) -> dict[str, Any]:
    return {
        "value": e.value if math.isfinite(e.value) else None,
        "low": e.low if math.isfinite(e.low) else None,
        "high": e.high if math.isfinite(e.high) else None,
        "n": e.n,
    }


def _human_means(run: JudgeRun) -> dict[str, dict[int, float]]:
    rows = (
        ReviewScore.objects.filter(review__study=run.study, review__status=Review.Status.SUBMITTED)
        .values("metric", "review__idea_id")
        .annotate(mean=Avg("score"))
    )
    out: dict[str, dict[int, float]] = defaultdict(dict)
    for r in rows:
        out[r["metric"]][r["review__idea_id"]] = float(r["mean"])
    return out


def _calibration(run: JudgeRun, n_boot: int) -> list[dict[str, Any]]:
    judge: dict[str, dict[int, float]] = defaultdict(dict)
    for r in (
        Judgment.objects.filter(run=run, score__isnull=False)
        .values("metric", "idea_id")
        .annotate(mean=Avg("score"))
    ):
        judge[r["metric"]][r["idea_id"]] = float(r["mean"])
    human = _human_means(run)
    scales = run.study.form_definition().scales()
    rows = []
    for metric in sorted(judge):
        both = [i for i in judge[metric] if i in human.get(metric, {})]
        if len(both) < 3:
            continue
        j: dict[Hashable, float] = {i: judge[metric][i] for i in both}
        h: dict[Hashable, float] = {i: human[metric][i] for i in both}
        fit = calibration(j, h, n_boot=n_boot, seed=run.pk)
        scale = scales.get(metric)
        rows.append(
            {
                "metric": metric,
                "n_ideas": fit["n"],
                "intercept": _est(fit["intercept"]),
                "slope": _est(fit["slope"]),
                "residual_sd": fit["residual_sd"] if math.isfinite(fit["residual_sd"]) else None,
                "plot": reliability_plot(
                    j,
                    h,
                    title=f"{metric}: human mean against judge score",
                    scale=(float(scale[0]), float(scale[1])) if scale else None,
                ),
            }
        )
    return rows


def _conditions(run: JudgeRun) -> dict[Hashable, Hashable]:
    """Each idea's condition; ideas in several conditions are left out (their games say
    nothing about one condition against another)."""
    seen: dict[int, set[str]] = defaultdict(set)
    for idea_id, key in IdeaCondition.objects.filter(study=run.study).values_list(
        "idea_id", "condition__key"
    ):
        seen[idea_id].add(key)
    out: dict[Hashable, Hashable] = {
        i: next(iter(keys)) for i, keys in seen.items() if len(keys) == 1
    }
    return out


def _style(run: JudgeRun, n_boot: int) -> list[dict[str, Any]]:
    groups = _conditions(run)
    games: dict[str, list[tuple[Hashable, Hashable, float]]] = defaultdict(list)
    for a, b, first, verdict, dim in PairwiseOutcome.objects.filter(run=run).values_list(
        "idea_a_id", "idea_b_id", "first_shown_id", "verdict", "dimension"
    ):
        if verdict not in ("A", "B", "tie") or a not in groups or b not in groups:
            continue
        if groups[a] == groups[b]:
            continue  # a game within one condition rates no condition against another
        a_result = {"A": 1.0, "B": 0.0, "tie": 0.5}[verdict]
        second = b if first == a else a
        games[dim].append((first, second, a_result if first == a else 1.0 - a_result))
    if not games:
        return []
    source = (run.params or {}).get("text", "normalized")
    ideas = {i.pk: i for i in run.study.ideas.filter(pk__in=[int(str(k)) for k in groups])}
    features: dict[Hashable, Mapping[str, float]] = {
        pk: style_features(idea_text(idea, source)) for pk, idea in ideas.items()
    }
    rated: Sequence[Hashable] = sorted({str(v) for v in groups.values()})
    out = []
    for dim, comparisons in sorted(games.items()):
        try:
            _raw_fit, raw, _ = style_bt_intervals(
                comparisons, features, groups, rated=rated, names=(), n_boot=n_boot, seed=run.pk
            )
            _fit, controlled, beta = style_bt_intervals(
                comparisons, features, groups, rated=rated, n_boot=n_boot, seed=run.pk
            )
        except (np.linalg.LinAlgError, ValueError) as exc:
            out.append({"dimension": dim, "games": len(comparisons), "error": str(exc)})
            continue
        out.append(
            {
                "dimension": dim,
                "games": len(comparisons),
                "ratings": [
                    {"condition": c, "raw": _est(raw[c]), "style_controlled": _est(controlled[c])}
                    for c in rated
                    if c in raw and c in controlled
                ],
                "beta": [
                    {"feature": name, **_est(beta[name])}
                    for name in (*STYLE_FEATURES, "position")
                    if name in beta
                ],
            }
        )
    return out


def run_reliability(run: JudgeRun, *, n_boot: int = PANEL_BOOT) -> dict[str, Any] | None:
    """The panel of a finished run (None while it runs, or for a method it does not
    cover: baselines and validation runs)."""
    if run.status != JudgeRun.Status.DONE or run.method not in _SCORED | _PAIRED:
        return None
    ended = run.finished_at.isoformat() if run.finished_at else ""
    key = f"judging:reliability:{_CACHE_VERSION}:{run.pk}:{ended}:{run.done_calls}:{n_boot}"
    panel = cache.get(key)
    if panel is None:
        panel = {
            "calibration": _calibration(run, n_boot) if run.method in _SCORED else [],
            "style": _style(run, n_boot) if run.method in _PAIRED else [],
            "n_boot": n_boot,
            "not_measured": [
                "repetition stability: this run asked each prompt once",
                "self-preference: the study's conditions do not name the model that wrote "
                "their ideas",
            ],
        }
        cache.set(key, panel, timeout=24 * 3600)
    return panel


def reliability_csv(panel: dict[str, Any]) -> str:
    """The panel's figures, one row per figure, for a spreadsheet."""
    buf = io.StringIO()
    w = csvsafe.writer(buf)
    w.writerow(["figure", "metric_or_dimension", "item", "value", "ci_low", "ci_high", "n"])
    for row in panel["calibration"]:
        for part in ("intercept", "slope"):
            e = row[part]
            w.writerow(
                ["calibration", row["metric"], part, e["value"], e["low"], e["high"], e["n"]]
            )
    for block in panel["style"]:
        if "error" in block:
            continue
        for r in block["ratings"]:
            for kind in ("raw", "style_controlled"):
                e = r[kind]
                w.writerow(
                    [f"bt_{kind}", block["dimension"], r["condition"], e["value"], e["low"],
                     e["high"], block["games"]]
                )  # fmt: skip
        for b in block["beta"]:
            w.writerow(
                ["style_beta", block["dimension"], b["feature"], b["value"], b["low"], b["high"],
                 block["games"]]
            )  # fmt: skip
    return buf.getvalue()
