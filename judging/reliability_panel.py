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

import hashlib
import io
import math
from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
from django.core.cache import cache

from llm.models import LLMCall
from studies import csvsafe
from studies.analysis.options import ReportOptions
from studies.models import (
    Condition,
    IdeaCondition,
    PairJudgment,
    PairTask,
    Review,
    ReviewScore,
)
from studies.selectors import idea_text, reviewer_means_by_idea

from .methods.panel import member_means, panel_scores
from .methods.reliability import (
    STYLE_COVARIATES,
    VIF_LIMIT,
    Estimate,
    calibration,
    identical_share,
    model_family,
    reliability_plot,
    score_sd,
    self_preference,
    style_bt_intervals,
    style_covariates,
)
from .models import JudgeRun, Judgment, PairwiseOutcome
from .panel_agreement import panel_rows, run_panel_agreement
from .services.base import panel_outcomes
from .services.runs import REPEATABLE

#: Bootstrap resamples of the panel's intervals (seeded by the run's id): the report's
#: default, so the run page and the report show the same intervals.
PANEL_BOOT = ReportOptions().panel_bootstrap
_SCORED = {JudgeRun.Method.DIRECT, JudgeRun.Method.ABSOLUTE}
_PAIRED = {JudgeRun.Method.PAIRWISE, JudgeRun.Method.SWISS, JudgeRun.Method.ACTIVE_BT}
_CACHE_VERSION = 5


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def _est(e: Estimate) -> dict[str, Any]:
    return {
        "value": e.value if math.isfinite(e.value) else None,
        "low": e.low if math.isfinite(e.low) else None,
        "high": e.high if math.isfinite(e.high) else None,
        "n": e.n,
    }


def _human_means(run: JudgeRun) -> dict[str, dict[int, float]]:
    return reviewer_means_by_idea(run.study)


def _judge_means(run: JudgeRun) -> dict[str, dict[int, float]]:
    """The run's score of each idea per metric: the mean of its parseable samples, or of
    a panel run, the panel's (the mean of its members' means)."""
    by_member: dict[int, list[tuple[Hashable, int, float | None]]] = defaultdict(list)
    for member, idea_id, metric, sample, score in Judgment.objects.filter(run=run).values_list(
        "member", "idea_id", "metric", "sample", "score"
    ):
        by_member[member].append(((metric, idea_id), sample, score))
    out: dict[str, dict[int, float]] = defaultdict(dict)
    combined = panel_scores({m: member_means(rows) for m, rows in by_member.items()})
    for (metric, idea_id), value in combined.items():
        out[metric][idea_id] = value
    return out


def _calibration(run: JudgeRun, n_boot: int, plots: bool = True) -> list[dict[str, Any]]:
    judge = _judge_means(run)
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
                "plot": (
                    reliability_plot(
                        j,
                        h,
                        title=f"{metric}: human mean against judge score",
                        scale=(float(scale[0]), float(scale[1])) if scale else None,
                    )
                    if plots
                    else ""
                ),
            }
        )
    return rows


def study_conditions(study: Any) -> dict[Hashable, Hashable]:
    """Each idea's condition; ideas in several conditions are left out (their games say
    nothing about one condition against another)."""
    seen: dict[int, set[str]] = defaultdict(set)
    for idea_id, key in IdeaCondition.objects.filter(study=study).values_list(
        "idea_id", "condition__key"
    ):
        seen[idea_id].add(key)
    out: dict[Hashable, Hashable] = {
        i: next(iter(keys)) for i, keys in seen.items() if len(keys) == 1
    }
    return out


def _games(run: JudgeRun) -> list[tuple[int, int, int, str, str]]:
    """(idea_a, idea_b, first shown, verdict, dimension) of the run's games; a panel's are
    its combined verdicts."""
    return [
        (o.idea_a_id, o.idea_b_id, o.first_shown_id, o.verdict, o.dimension)
        for o in panel_outcomes(run)
    ]


def _style(run: JudgeRun, n_boot: int) -> list[dict[str, Any]]:
    source = (run.params or {}).get("text", "normalized")
    return style_blocks(run.study, _games(run), source, n_boot=n_boot, seed=run.pk)


def style_blocks(
    study: Any,
    games_played: Sequence[tuple[int, int, int, str, str]],
    source: str,
    *,
    n_boot: int,
    seed: int,
) -> list[dict[str, Any]]:
    """Per dimension, the conditions' Bradley–Terry ratings from `games_played` ((idea_a,
    idea_b, first shown, verdict, dimension), games of one run or of several runs of one
    judge) without and with the ideas' style covariates (read from their `source` text),
    with vertex-bootstrap intervals, and each covariate's pull."""
    groups = study_conditions(study)
    games: dict[str, list[tuple[Hashable, Hashable, float]]] = defaultdict(list)
    for a, b, first, verdict, dim in games_played:
        if verdict not in ("A", "B", "tie") or a not in groups or b not in groups:
            continue
        if groups[a] == groups[b]:
            continue  # a game within one condition rates no condition against another
        a_result = {"A": 1.0, "B": 0.0, "tie": 0.5}[verdict]
        second = b if first == a else a
        games[dim].append((first, second, a_result if first == a else 1.0 - a_result))
    if not games:
        return []
    ideas = {i.pk: i for i in study.ideas.filter(pk__in=[int(str(k)) for k in groups])}
    features: dict[Hashable, Mapping[str, float]] = {
        pk: style_covariates(idea_text(idea, source)) for pk, idea in ideas.items()
    }
    rated: Sequence[Hashable] = sorted({str(v) for v in groups.values()})
    out = []
    for dim, comparisons in sorted(games.items()):
        try:
            _raw_fit, raw, _ = style_bt_intervals(
                comparisons, features, groups, rated=rated, names=(), n_boot=n_boot, seed=seed
            )
            fit, controlled, beta = style_bt_intervals(
                comparisons, features, groups, rated=rated, n_boot=n_boot, seed=seed
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
                    {"feature": name, **_est(beta[name]), "vif": _finite(fit.vif.get(name))}
                    for name in (*STYLE_COVARIATES, "position")
                    if name in beta
                ],
                # Features whose pull the games cannot separate from the others' (they
                # vary together across these ideas): their coefficients are not read
                # one by one; the ratings with all of them held equal still are.
                "collinear": [
                    {"feature": name, "vif": _finite(fit.vif[name])}  # None: infinite
                    for name in STYLE_COVARIATES
                    if fit.vif.get(name, math.nan) > VIF_LIMIT
                ],
            }
        )
    return out


# --- self-preference ------------------------------------------------------------------


def _families(study: Any) -> dict[int, str]:
    """Each idea's generating family: its condition's named model, read by `model_family`;
    "human" for a human condition's idea. Ideas in several conditions, and ideas of an AI
    condition that names no model (its family could be the judge's), are left out."""
    named = {
        c.key: (model_family(c.generating_model) if c.generating_model else None, c.kind)
        for c in study.conditions.all()
    }
    out: dict[int, str] = {}
    for idea_id, key in study_conditions(study).items():
        family, kind = named.get(str(key), (None, ""))
        if family is not None:
            out[int(str(idea_id))] = family
        elif kind == Condition.Kind.HUMAN:
            out[int(str(idea_id))] = "human"
    return out


def _human_pair_results(run: JudgeRun) -> dict[tuple[str, int, int], list[float]]:
    return human_pair_results(run.study)


def human_pair_results(study: Any) -> dict[tuple[str, int, int], list[float]]:
    """Reviewers' results per (dimension, idea_a, idea_b) with a < b, as idea_a's score
    (1 win, ½ tie, 0 loss), one entry per submitted rating."""
    out: dict[tuple[str, int, int], list[float]] = defaultdict(list)
    for a, b, dim, winner in PairJudgment.objects.filter(
        task__study=study, task__status=PairTask.Status.SUBMITTED
    ).values_list("task__idea_a_id", "task__idea_b_id", "dimension", "winner"):
        result = {"a": 1.0, "b": 0.0, "tie": 0.5}.get(winner)
        if result is None:
            continue
        lo, hi = sorted((a, b))
        out[(dim, lo, hi)].append(result if lo == a else 1.0 - result)
    return out


def _self_preference(run: JudgeRun, n_boot: int) -> dict[str, Any]:
    """The judge's score for its own family's ideas against others', with the reviewers'
    on the same pairs; or why it is not measured."""
    model = run.config.resolved_model() if run.config else ""
    return self_preference_figures(run.study, model, _games(run), n_boot=n_boot, seed=run.pk)


def self_preference_figures(
    study: Any,
    model: str,
    games: Sequence[tuple[int, int, int, str, str]],
    *,
    n_boot: int,
    seed: int,
) -> dict[str, Any]:
    """Self-preference of a judge asking `model` from its `games` (idea_a, idea_b, first
    shown, verdict, dimension) in `study`, beside the reviewers' on the same pairs; or why
    it is not measured."""
    if not model:
        return {"skipped": "the judge names no model"}
    judge_family = model_family(model)
    families = _families(study)
    own = {i for i, f in families.items() if f == judge_family}
    if not own:
        return {
            "judge_family": judge_family,
            "skipped": f"no condition names a generating model of the judge's family "
            f"({judge_family})",
        }
    judged: dict[tuple[str, int, int], list[float]] = defaultdict(list)
    for a, b, _first, verdict, dim in games:
        result = {"A": 1.0, "B": 0.0, "tie": 0.5}.get(verdict)
        if result is None or a not in families or b not in families:
            continue
        if (a in own) == (b in own):
            continue  # a mixed pair only: one idea of the judge's family, one of another
        o, x = (a, b) if a in own else (b, a)
        judged[(dim, o, x)].append(result if o == a else 1.0 - result)
    human = human_pair_results(study)
    rows = []
    for dim in sorted({d for d, _, _ in judged}):
        pairs = []
        for (d, o, x), results in sorted(judged.items()):
            if d != dim:
                continue
            lo, hi = sorted((o, x))
            h = human.get((dim, lo, hi))
            h_own = None if not h else float(np.mean(h)) if o == lo else 1.0 - float(np.mean(h))
            pairs.append((o, x, float(np.mean(results)), h_own))
        fig = self_preference(pairs, n_boot=n_boot, seed=seed)
        rows.append(
            {
                "dimension": dim,
                "pairs": len(pairs),
                "judge": _est(fig.judge),
                "human": _est(fig.human),
                "difference": _est(fig.difference),
            }
        )
    if not rows:
        return {"judge_family": judge_family, "skipped": "no game of the judge is a mixed pair"}
    return {"judge_family": judge_family, "rows": rows}


# --- repetition stability ----------------------------------------------------------------


def _repeat_calls(run: JudgeRun, firsts: Mapping[int, str], rows: Any) -> dict[str, list[Any]]:
    """The parsed answers of this run's repeated prompts, by prompt hash: the calls the run
    made for its repeat units (tied to the run, answered, and the call of none of its
    outcome `rows`), of the prompts whose first answers are in `firsts` (call id → prompt
    hash)."""
    hashes = set(firsts.values())
    out: dict[str, list[Any]] = defaultdict(list)
    for digest, parsed in (
        LLMCall.objects.filter(run=run, error="", prompt_hash__in=hashes)
        .exclude(pk__in=rows.filter(call__isnull=False).values("call_id"))
        .order_by("pk")
        .values_list("prompt_hash", "parsed")
    ):
        out[digest].append(parsed)
    return out


def pair_repeat_answers(run: JudgeRun) -> dict[Hashable, list[Hashable | None]]:
    """The answers to each of the run's repeated pairwise prompts (first, then repeats),
    by prompt hash."""
    firsts: dict[int, str] = {}
    first_answer: dict[str, str | None] = {}
    for o in PairwiseOutcome.objects.filter(run=run, call__isnull=False).select_related("call"):
        assert o.call is not None
        firsts[o.call.pk] = o.call.prompt_hash
        first_answer[o.call.prompt_hash] = o.shown_winner()
    again = _repeat_calls(run, firsts, PairwiseOutcome.objects.filter(run=run))
    return {
        digest: [
            first_answer[digest],
            *((p or {}).get("winner") if isinstance(p, dict) else None for p in repeats),
        ]
        for digest, repeats in again.items()
    }


def _pair_repetition(run: JudgeRun, n_boot: int) -> list[dict[str, Any]]:
    dims = set(PairwiseOutcome.objects.filter(run=run).values_list("dimension", flat=True))
    return pair_repetition_rows(
        pair_repeat_answers(run), run.study, dims, n_boot=n_boot, seed=run.pk
    )


def pair_repetition_rows(
    answers: Mapping[Hashable, list[Hashable | None]],
    study: Any,
    dims: set[str],
    *,
    n_boot: int,
    seed: int,
) -> list[dict[str, Any]]:
    """The identical-verdict share of repeated pairwise prompts, beside the reviewers'
    (their ratings of one pair on one of `dims` as the answers to one prompt)."""
    if not answers:
        return []
    human: dict[Hashable, list[Hashable | None]] = {
        key: list(results) for key, results in human_pair_results(study).items() if key[0] in dims
    }
    return [
        {
            "figure": "identical verdicts",
            "metric": "pairwise",
            "prompts": len(answers),
            "judge": _est(identical_share(dict(answers), n_boot=n_boot, seed=seed)),
            "human": _est(identical_share(human, n_boot=n_boot, seed=seed)),
        }
    ]


def _repeat_scores(run: JudgeRun, parsed: Any) -> dict[str, float]:
    if not isinstance(parsed, dict):
        return {}
    if "scores" in parsed and isinstance(parsed["scores"], dict):
        return {
            m: float(v["score"])
            for m, v in parsed["scores"].items()
            if isinstance(v, dict) and isinstance(v.get("score"), int | float)
        }
    metric = (run.params or {}).get("metric")
    if metric and isinstance(parsed.get("score"), int | float):
        return {metric: float(parsed["score"])}
    return {}


def score_repeat_groups(run: JudgeRun) -> dict[str, dict[Hashable, list[float | None]]]:
    """Per metric, the scores given to each of the run's repeated prompts (first, then
    repeats), by prompt hash."""
    firsts: dict[int, str] = {}
    first_scores: dict[str, dict[str, float | None]] = defaultdict(dict)
    for call_id, digest, metric, score in Judgment.objects.filter(
        run=run, sample=0, call__isnull=False
    ).values_list("call_id", "call__prompt_hash", "metric", "score"):
        firsts[call_id] = digest
        first_scores[digest][metric] = score
    again = _repeat_calls(run, firsts, Judgment.objects.filter(run=run))
    if not again:
        return {}
    return {
        metric: {
            digest: [
                first_scores[digest].get(metric),
                *(_repeat_scores(run, p).get(metric) for p in repeats),
            ]
            for digest, repeats in again.items()
        }
        for metric in sorted({m for scores in first_scores.values() for m in scores})
    }


def _score_repetition(run: JudgeRun, n_boot: int) -> list[dict[str, Any]]:
    return score_repetition_rows(score_repeat_groups(run), run.study, n_boot=n_boot, seed=run.pk)


def score_repetition_rows(
    by_metric: Mapping[str, Mapping[Hashable, list[float | None]]],
    study: Any,
    *,
    n_boot: int,
    seed: int,
) -> list[dict[str, Any]]:
    """The identical-score share and score SD of repeated prompts per metric, beside the
    reviewers' (the scores of one idea by its reviewers as the repeats of one prompt)."""
    if not by_metric:
        return []
    reviewers: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for metric, idea_id, score in ReviewScore.objects.filter(
        review__study=study,
        review__status=Review.Status.SUBMITTED,
        review__idea__gold_ranges__isnull=True,
    ).values_list("metric", "review__idea_id", "score"):
        reviewers[metric][idea_id].append(float(score))
    rows = []
    for metric, groups in by_metric.items():
        human: dict[Hashable, list[float | None]] = {
            k: list(v) for k, v in reviewers.get(metric, {}).items()
        }
        same: dict[Hashable, list[Hashable | None]] = {k: list(v) for k, v in groups.items()}
        rows.append(
            {
                "figure": "identical scores",
                "metric": metric,
                "prompts": len(groups),
                "judge": _est(identical_share(same, n_boot=n_boot, seed=seed)),
                "human": _est(
                    identical_share(
                        {k: list(v) for k, v in human.items()}, n_boot=n_boot, seed=seed
                    )
                ),
            }
        )
        rows.append(
            {
                "figure": "score SD",
                "metric": metric,
                "prompts": len(groups),
                "judge": _est(score_sd(dict(groups), n_boot=n_boot, seed=seed)),
                "human": _est(score_sd(human, n_boot=n_boot, seed=seed)),
            }
        )
    return rows


def _not_measured(panel: dict[str, Any], run: JudgeRun) -> list[str]:
    out = []
    if not panel["repetition"]:
        out.append(
            "repetition stability: this run asked each prompt once (the run parameter "
            "repeat_share asks a share of them again)"
            if run.method in REPEATABLE
            else f"repetition stability: {run.method} runs do not ask prompts again"
        )
    sp = panel["self_preference"]
    if run.method in _PAIRED and "skipped" in sp:
        out.append(f"self-preference: {sp['skipped']}")
    return out


def run_reliability(
    run: JudgeRun, *, n_boot: int = PANEL_BOOT, plots: bool = True
) -> dict[str, Any] | None:
    """The panel of a finished run (None while it runs, or for a method it does not
    cover: baselines and validation runs). Without `plots` its calibration plots are
    left empty (the report reads the figures only), unless a panel with them is cached
    already."""
    if run.status != JudgeRun.Status.DONE or run.method not in _SCORED | _PAIRED:
        return None
    ended = run.finished_at.isoformat() if run.finished_at else ""
    # Naming a condition's generating model after the run changes the panel, not the run.
    named = hashlib.sha256(
        repr(sorted(run.study.conditions.values_list("key", "generating_model"))).encode()
    ).hexdigest()[:16]
    key = f"judging:reliability:{_CACHE_VERSION}:{run.pk}:{ended}:{run.done_calls}:{n_boot}:{named}"
    panel = cache.get(f"{key}:plots")
    if panel is None and not plots:
        panel = cache.get(key)
    if panel is None:
        scored = run.method in _SCORED
        panel = {
            "calibration": _calibration(run, n_boot, plots) if scored else [],
            "style": _style(run, n_boot) if run.method in _PAIRED else [],
            "self_preference": _self_preference(run, n_boot) if run.method in _PAIRED else {},
            "repetition": (
                _score_repetition(run, n_boot) if scored else _pair_repetition(run, n_boot)
            ),
            "n_boot": n_boot,
            # A panel run: its members' and its own agreement with the reviewers.
            "judge_panel": run_panel_agreement(run, n_boot=n_boot),
        }
        panel["not_measured"] = _not_measured(panel, run)
        cache.set(f"{key}:plots" if plots else key, panel, timeout=24 * 3600)
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
        for b in block["beta"]:
            if b["feature"] in STYLE_COVARIATES:  # the position is a constant: no inflation
                vif = "inf" if b.get("vif") is None and b["value"] is not None else b.get("vif")
                w.writerow(
                    ["style_vif", block["dimension"], b["feature"], vif, "", "", block["games"]]
                )
    sp = panel.get("self_preference") or {}
    for row in sp.get("rows", []):
        for part in ("judge", "human", "difference"):
            e = row[part]
            w.writerow(
                [f"self_preference_{part}", row["dimension"], sp["judge_family"], e["value"],
                 e["low"], e["high"], e["n"]]
            )  # fmt: skip
    for row in panel.get("repetition", []):
        for who in ("judge", "human"):
            e = row[who]
            w.writerow(
                [f"repetition_{who}", row["metric"], row["figure"], e["value"], e["low"],
                 e["high"], e["n"]]
            )  # fmt: skip
    if panel.get("judge_panel"):
        for r in panel_rows(panel["judge_panel"]):
            w.writerow(
                [f"panel_{r['measure']}", r["metric"], r["of"], r["value"], r["low"], r["high"],
                 r["n"]]
            )  # fmt: skip
    return buf.getvalue()


def reliability_for_report(run: JudgeRun, *, n_boot: int = PANEL_BOOT) -> dict[str, Any] | None:
    """The run's panel for the study report: one row per figure (what, on which metric or
    dimension, the judge's value and interval, the reviewers' where the panel has one),
    and what was not measured. No plots; None for a run without a panel."""
    panel = run_reliability(run, n_boot=n_boot, plots=False)
    if panel is None:
        return None
    none: dict[str, Any] = {"value": None, "low": None, "high": None, "n": 0}
    rows: list[dict[str, Any]] = []

    def add(figure: str, on: str, item: str, judge: dict[str, Any], human: Any = None) -> None:
        rows.append({"figure": figure, "on": on, "item": item, "judge": judge, "human": human})

    for row in panel["calibration"]:
        for part in ("slope", "intercept"):
            add("calibration", row["metric"], part, row[part])
    for block in panel["style"]:
        for r in block.get("ratings", []):
            add("bt_raw", block["dimension"], r["condition"], r["raw"])
            add("bt_style_controlled", block["dimension"], r["condition"], r["style_controlled"])
    sp = panel["self_preference"]
    for r in sp.get("rows", []):
        add("self_preference", r["dimension"], sp["judge_family"], r["judge"], r["human"])
        add("self_preference_difference", r["dimension"], sp["judge_family"], r["difference"])
    for r in panel["repetition"]:
        add("repetition", r["metric"], r["figure"], r["judge"], r["human"])
    for r in rows:
        r["human"] = r["human"] or dict(none)
    return {"rows": rows, "not_measured": panel["not_measured"], "n_boot": panel["n_boot"]}
