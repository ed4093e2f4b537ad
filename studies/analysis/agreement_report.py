"""The report's agreement section: how far each judge agrees with the reviewers, beside
how far the reviewers agree with one another (the ceiling), as tables the report, the HTML
and the CSVs share. `build_report` (report.py) calls `build_agreement`; the arithmetic is
in agreement.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import numpy as np
import pandas as pd

from . import consistency as cons
from .frame import json_float, plain_value
from .options import CHANCE_RANKINGS, ReportOptions
from .rounding import cell_number, fixed, p_text, percent_text, signed_text

if TYPE_CHECKING:
    from .agreement import JudgeAgreement, MetricCorrelations, TopKOverlap

# One judge's figure on one metric, as a judges x metrics table reads it.
_Figure = TypeVar("_Figure")


@dataclass
class JudgeData:
    """One judge as plain frames (agreement.py's `judge_scores` / `judge_pairs`).

    `computed` marks a no-LLM baseline the report computed itself (no stored run)."""

    key: str
    label: str
    method: str
    baseline: bool
    model: str = ""
    judge_scores: pd.DataFrame | None = None
    judge_pairs: pd.DataFrame | None = None
    lengths: Mapping[str, float] | None = None
    info: dict[str, Any] = field(default_factory=dict)
    computed: bool = False


def _cell(
    value: Any,
    fmt: str,
    how: str,
    *,
    n: Any = None,
    ci: tuple[Any, Any] = (None, None),
    chance_range: tuple[Any, Any] = (None, None),
    reason: str | None = None,
) -> dict[str, Any]:
    return {
        "value": json_float(value)
        if isinstance(value, float | np.floating)
        else plain_value(value),
        "format": fmt,
        "ci_low": json_float(ci[0]) if ci[0] is not None else None,
        "ci_high": json_float(ci[1]) if ci[1] is not None else None,
        "range_low": json_float(chance_range[0]) if chance_range[0] is not None else None,
        "range_high": json_float(chance_range[1]) if chance_range[1] is not None else None,
        "n": plain_value(n),
        "how": how,
        "reason": reason,
    }


def _p(x: Any) -> str:
    return "–" if x is None else p_text(x)


def _pc(x: Any) -> str:
    return "–" if x is None else percent_text(x, 1)


def _signed(x: float, digits: int) -> str:
    """`x` with its sign always written (+0.013, -0.013), rounded as `fixed`."""
    text = fixed(x, digits)
    return text if text.startswith("-") else f"+{text}"


class ComputedBaselines(NamedTuple):
    """The no-LLM baselines the report computes itself (`computed_baselines`).

    Attributes
    ----------
    judges
        One `JudgeData` per baseline that can run.
    status
        Baseline method → {available, reason, how}, as the agreement section's
        "baselines" shows it (JSON-ready).
    """

    judges: list[JudgeData]
    status: dict[str, Any]


def computed_baselines(
    df: pd.DataFrame,
    *,
    metric: str,
    lengths: Mapping[str, float] | None,
    reasons: Mapping[str, str | None],
    seed: int,
    chance_rankings: int = CHANCE_RANKINGS,
) -> ComputedBaselines:
    """The no-LLM baselines the report computes, for studies without a stored baseline run:
    the text length ranking (what longer-text-wins converges to) as a judge, and the
    status of the random baseline, which is no judge: `build_agreement` reports what
    random rankings give by chance (`agreement.chance_agreement`), since any one random
    ranking is a single draw that can line up with how the idea ids sort. A baseline that
    cannot run (no text) is reported with its reason, never with a number.

    Parameters
    ----------
    df
        The review frame; its idea ids are ranked.
    metric
        The metric the length ranking stands for (the report's headline metric).
    lengths
        Idea id → text length, for longer-text-wins; None: no texts.
    reasons
        Baseline method → why it cannot run (None: it can), from the study.
    seed
        Seed of the random rankings.
    chance_rankings
        How many random rankings chance is read from (`ReportOptions.chance_rankings`).

    Returns
    -------
    ComputedBaselines
        The baselines that can run as judges, and every baseline's status; unpacks as
        ``judges, status``.
    """
    ideas = sorted(set(df["idea_id"]))
    out: list[JudgeData] = []
    status: dict[str, Any] = {
        "baseline_random": {
            "available": True,
            "reason": None,
            "how": f"computed in the report: what chance gives, from {chance_rankings:,} "
            f"independent uniformly random rankings of the reviewed ideas (seed {seed}): on "
            "each metric the mean Spearman ρ and Kendall τ-b of a random ranking with the "
            "human means, and the range holding the central 95 % of them (the chance row "
            "of the rank correlation table)",
        }
    }
    reason = reasons.get("baseline_longer")
    usable = lengths is not None and any(lengths.get(i, 0) > 0 for i in ideas)
    if usable and reason is None:
        assert lengths is not None
        longer = pd.DataFrame(
            {
                "idea_id": ideas,
                "metric": metric,
                "score": [float(lengths.get(i, np.nan)) for i in ideas],
            }
        )
        out.append(
            JudgeData(
                key="baseline_longer",
                label="Baseline: longer text",
                method="baseline_longer",
                baseline=True,
                judge_scores=longer,
                lengths=lengths,
                computed=True,
            )
        )
        status["baseline_longer"] = {
            "available": True,
            "reason": None,
            "how": "computed in the report: ideas ranked by the length (characters) of the "
            f"text a judge would see, scored on {metric}",
        }
    else:
        status["baseline_longer"] = {
            "available": False,
            "reason": reason or "Longer text wins cannot run: the ideas have no text.",
            "how": None,
        }
    return ComputedBaselines(judges=out, status=status)


def _agreement_ceiling(
    df: pd.DataFrame,
    *,
    metrics: list[str],
    judges: Sequence[JudgeData],
    consistency: Mapping[str, Any],
    o: ReportOptions,
) -> dict[str, Any]:
    """The human ceiling per metric: human-human split-half consistency on all ideas.

    The headline metric's value (with CI) comes from the consistency section; the others
    get a CI here. A CI for a non-headline metric is only worth its cost where a judge
    scored it."""
    from . import agreement as ag

    judged = {
        str(m)
        for j in judges
        if not j.computed and j.judge_scores is not None
        for m in j.judge_scores["metric"].unique()
    }
    ceiling: dict[str, Any] = {}
    for m in metrics:
        known = (consistency.get("by_metric") or {}).get(m, {}).get("all")
        if known is None or (known.get("ci_low") is None and m in judged):
            try:
                # Draws shrink past 1,500 idea units, as for each judge (agreement.py).
                units = int(df.groupby(["condition", "idea_id"]).ngroups)
                known = cons.inter_reviewer_consistency(
                    df,
                    m,
                    rows="all",
                    n_splits=ag.scaled_draws(o.consistency_splits, units),
                    n_bootstrap=ag.scaled_draws(o.agreement_bootstrap, units),
                    n_permutations=0,
                    splits_per_resample=max(1, round(10 * min(1.0, ag.SCALE_UNITS / units))),
                    seed=o.seed,
                ).as_dict()
            except ValueError as exc:
                known = {"balanced_accuracy": None, "reason": str(exc)}
        if known.get("balanced_accuracy") is not None and known.get("ci_low") is None:
            known = {**known, "ci_reason": _ceiling_no_interval(known, m, consistency, judged)}
        ceiling[m] = known
    return ceiling


def _ceiling_no_interval(
    known: Mapping[str, Any], metric: str, consistency: Mapping[str, Any], judged: set[str]
) -> str:
    """Why a human ceiling has no interval, in words for the report."""
    headline = consistency.get("metric")
    if not known.get("n_bootstrap"):
        if metric != headline and metric not in judged:
            return (
                "no interval: the report bootstraps the human ceiling only for its headline "
                f"metric ({headline}) and for metrics a judge scored, and no judge scored "
                f"{metric}"
            )
        return "no interval: the report's options ask for no bootstrap resamples"
    return "no interval: the bootstrap resamples gave no usable value"


def _judge_agreement_entry(
    df: pd.DataFrame,
    j: JudgeData,
    *,
    metrics: list[str],
    head: str,
    human_pairs: pd.DataFrame | None,
    o: ReportOptions,
    ceilings: dict[Any, Any],
) -> tuple[dict[str, Any], JudgeAgreement | None]:
    """One judge's entry in the agreement section, and its result when it could be
    computed (None when the run has nothing to compare or the comparison failed)."""
    from . import agreement as ag

    scores = j.judge_scores
    if scores is not None:
        scores = scores[scores["metric"].isin(metrics)]
        if j.computed:
            scores = scores[scores["metric"] == head]
        if scores.empty:
            scores = None
    entry: dict[str, Any] = {
        "key": j.key,
        "label": j.label,
        "method": j.method,
        "baseline": j.baseline,
        "computed_in_report": j.computed,
        "model": j.model,
        "info": j.info,
    }
    if scores is None and j.judge_pairs is None:
        entry.update(available=False, reason="the run produced no score on a form metric")
        return entry, None
    judged = set() if scores is None else set(scores["metric"].unique())
    try:
        res = ag.judge_agreement(
            df,
            judge_scores=scores,
            judge_pairs=j.judge_pairs if j.judge_pairs is not None and len(j.judge_pairs) else None,
            human_pairs=human_pairs,
            metrics=None if scores is None else [m for m in metrics if m in judged],
            lengths=j.lengths,
            resampling=cons.Resampling(
                rows="all",
                n_splits=o.agreement_splits,
                n_bootstrap=o.agreement_bootstrap,
                n_permutations=o.agreement_permutations,
                seed=o.seed,
            ),
            ceiling_cache=ceilings,
        )
    except ValueError as exc:
        entry.update(available=False, reason=str(exc))
        return entry, None
    entry.update(available=True, reason=None, result=res.as_dict())
    return entry, res


def _number_footnotes(tables: list[dict[str, Any]]) -> list[str]:
    """Give every cell of `tables` its footnote number; the footnotes in that order."""
    notes: list[str] = []
    for table in tables:
        for row in table["rows"]:
            for cell in row["cells"].values():
                notes.append(cell["how"])
                cell["note"] = len(notes)
    return notes


def build_agreement(
    df: pd.DataFrame,
    *,
    metrics: Sequence[str],
    judges: Sequence[JudgeData],
    human_pairs: pd.DataFrame | None,
    consistency: Mapping[str, Any],
    options: ReportOptions,
    baselines: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Human-LLM agreement for every judge, with the human ceiling beside it.

    Tables are judges x metrics; each cell carries its value, CI, n and one sentence saying
    how it was computed (shown on hover in the page and as a footnote in the files).

    Parameters
    ----------
    df
        The review frame.
    metrics
        The form's metrics.
    judges
        Stored judge runs and the report's computed baselines.
    human_pairs
        The reviewers' pair ratings, if any.
    consistency
        The report's consistency section (its headline metric and values are reused).
    options
        The report's options (draws, seed).
    baselines
        No-LLM baseline → whether it could run (`ComputedBaselines.status`).

    Returns
    -------
    dict
        The report's "agreement" section, JSON-ready by design and written out as it is:
        each judge's entry (its `JudgeAgreement.as_dict()` as "result"), the ceiling,
        Krippendorff's alpha per metric, the tables and their footnotes.
    """
    from . import agreement as ag

    metrics = list(metrics)
    o = options
    head = consistency.get("metric", metrics[-1]) if consistency.get("available") else metrics[-1]
    out: dict[str, Any] = {
        "available": bool(judges),
        "n_judges": sum(not j.computed for j in judges),
        "reason": None
        if any(not j.computed for j in judges)
        else "This study has no finished judge run: only the human ceiling and the no-LLM "
        "baselines the report computes itself are shown. Run a judge on the Judges page.",
        "metrics": metrics,
        "headline_metric": head,
        "options": {
            "splits": o.agreement_splits,
            "bootstrap": o.agreement_bootstrap,
            "permutations": o.agreement_permutations,
            "top_fraction": 0.25,
            "seed": o.seed,
            "rows": "all",
            "chance_rankings": o.chance_rankings,
        },
        "baselines": dict(baselines or {}),
        "judges": [],
        "tables": [],
    }

    out["ceiling"] = _agreement_ceiling(
        df, metrics=metrics, judges=judges, consistency=consistency, o=o
    )

    results: list[tuple[JudgeData, JudgeAgreement]] = []
    ceilings: dict[Any, Any] = {}  # the human ceiling, once per metric for all judges
    for j in judges:
        entry, res = _judge_agreement_entry(
            df, j, metrics=metrics, head=head, human_pairs=human_pairs, o=o, ceilings=ceilings
        )
        out["judges"].append(entry)
        if res is not None:
            results.append((j, res))

    alpha_judges = {
        j.key: j.judge_scores for j, _ in results if j.judge_scores is not None and not j.computed
    }
    out["krippendorff"] = {
        m: ag.krippendorff_with_judges(df, alpha_judges, m, level="ordinal").as_dict()
        for m in metrics
    }
    out["chance"] = {
        m: ag.chance_agreement(df, m, n_rankings=o.chance_rankings, seed=o.seed).as_dict()
        for m in metrics
    }
    out["human_pairs"] = {
        "n_ratings": 0 if human_pairs is None else len(human_pairs),
        "n_reviewers": 0 if human_pairs is None else int(human_pairs["reviewer_id"].nunique()),
    }
    out["tables"] = _agreement_tables(out, results, metrics)
    out["footnotes"] = _number_footnotes(out["tables"])
    return out


def _row(key: str, label: str, kind: str, cells: dict[str, Any]) -> dict[str, Any]:
    return {"key": key, "label": label, "kind": kind, "cells": cells}


def _kind(j: JudgeData) -> str:
    return "baseline" if j.baseline else "judge"


def _agreement_tables(
    out: dict[str, Any], results: Sequence[tuple[JudgeData, JudgeAgreement]], metrics: list[str]
) -> list[dict[str, Any]]:
    cols = [{"key": m, "label": m} for m in metrics]
    return [
        _consistency_table(out, results, metrics, cols),
        _correlation_table(out, results, cols),
        _top_k_table(results, cols),
        _pairwise_table(out, results),
        _diagnostics_table(results),
        _krippendorff_table(out, results, metrics, cols),
    ]


def _consistency_table(
    out: dict[str, Any],
    results: Sequence[tuple[JudgeData, JudgeAgreement]],
    metrics: list[str],
    cols: list[dict[str, str]],
) -> dict[str, Any]:
    """Si et al. consistency: each judge against the human–human ceiling."""
    rows = []
    cells = {}
    for m in metrics:
        c = out["ceiling"][m]
        if c.get("balanced_accuracy") is None:
            cells[m] = _cell(
                None,
                "pct",
                f"Human–human consistency on {m}: not computable.",
                reason=c.get("reason"),
            )
            continue
        cells[m] = _cell(
            c["balanced_accuracy"],
            "pct",
            f"Human–human ceiling on {m}: each unit's reviews split in random halves "
            f"{c['n_splits']} times; one half's means pick the top and bottom "
            f"{percent_text(c['top_fraction'], 0)} ({c['n_selected']} of {c['n_units']} idea × condition "
            f"units, {c['n_reviews']} reviews), the other half's median split scores them "
            f"(balanced accuracy, mean over splits); "
            + (
                f"{c['ci_reason']}."
                if c.get("ci_reason")
                else "95% CI: percentile bootstrap over units "
                f"({c.get('n_bootstrap', 0)} resamples)."
            ),
            n=c["n_units"],
            ci=(c.get("ci_low"), c.get("ci_high")),
        )
    rows.append(_row("ceiling", "Human ceiling (human–human)", "ceiling", cells))
    for j, res in results:
        if res.consistency is None:
            continue
        cells = {}
        for m in metrics:
            c = res.consistency.get(m)
            if c is None:
                continue
            if c.balanced_accuracy is None:
                cells[m] = _cell(
                    None,
                    "pct",
                    f"{j.label} on {m}: not computable: {c.reason}.",
                    n=c.n_units,
                    reason=c.reason,
                )
                continue
            cells[m] = _cell(
                c.balanced_accuracy,
                "pct",
                f"{j.label} on {m}: its scores pick the top and bottom "
                f"{percent_text(c.top_fraction, 0)} of {c.n_units} units ({c.n_selected} picked, "
                f"{c.n_reviews} reviews), scored against a random half of each unit's "
                f"reviewers (balanced accuracy, mean over {c.n_splits} splits); 95% CI: "
                f"bootstrap over units ({c.n_bootstrap} resamples); permutation p = "
                f"{_p(c.p_value)} ({c.n_permutations} shuffles); the other half of "
                f"the reviewers on the same splits: {_pc(c.human_same_splits)}.",
                n=c.n_units,
                ci=(c.ci_low, c.ci_high),
            )
        rows.append(_row(j.key, j.label, _kind(j), cells))
    table = {
        "id": "consistency",
        "title": "Consistency with the reviewers (Si et al. metric), judge vs. human ceiling",
        "caption": "Balanced accuracy of top/bottom 25 % picks against a random half of "
        "the reviewers; 50 % is chance. The ceiling row is the reviewers' own agreement.",
        "columns": cols,
        "rows": rows,
    }
    if not any(c.get("value") is not None for r in rows for c in r["cells"].values()):
        # The figure of this table would show only its chance line (report_files.py).
        reason = _first_reason(rows) or "too few ideas had two or more reviews"
        table["unplotted"] = (
            "There is no figure: no balanced accuracy could be computed, as each idea's "
            f"reviewers are split in halves and {reason}."
        )
    return table


def _first_reason(rows: Sequence[Mapping[str, Any]]) -> str | None:
    return next((c["reason"] for r in rows for c in r["cells"].values() if c.get("reason")), None)


def _judge_metric_table(
    results: Sequence[tuple[JudgeData, JudgeAgreement]],
    cols: list[dict[str, str]],
    *,
    table_id: str,
    title: str,
    caption: str,
    figures: Callable[[JudgeAgreement], Mapping[str, _Figure] | None],
    cell: Callable[[JudgeData, str, _Figure], dict[str, Any]],
) -> dict[str, Any]:
    """A judges x metrics table: a row per judge whose result has the `figures`, a cell
    per metric made by `cell` from the judge, the metric and that metric's figure."""
    rows = []
    for j, res in results:
        per_metric = figures(res)
        if per_metric is None:
            continue
        cells = {m: cell(j, m, figure) for m, figure in per_metric.items()}
        rows.append(_row(j.key, j.label, _kind(j), cells))
    return {"id": table_id, "title": title, "caption": caption, "columns": cols, "rows": rows}


def _correlation_cell(j: JudgeData, m: str, info: MetricCorrelations) -> dict[str, Any]:
    """Spearman's rho of one judge with the human mean per idea on one metric."""
    s, k = info.spearman, info.kendall
    if s.reason is not None:
        how = f"{j.label} on {m}: Spearman ρ not computable: {s.reason}."
    else:
        how = (
            f"{j.label} on {m}: Spearman ρ between the judge's score and the mean human "
            f"score per idea (each review once), n = {info.n_ideas} ideas "
            f"({info.n_reviews} reviews); 95% CI: percentile bootstrap over ideas "
            f"({s.n_bootstrap_used} of {s.n_bootstrap} resamples usable); "
            f"p = {_p(s.p_value)}; Kendall τ-b = "
            + ("–" if k.estimate is None else fixed(k.estimate, 3))
            + "."
        )
    return _cell(s.estimate, "num3", how, n=info.n_ideas, ci=(s.ci_low, s.ci_high), reason=s.reason)


def _top_k_cell(j: JudgeData, m: str, t: TopKOverlap) -> dict[str, Any]:
    """The overlap of one judge's top ideas with the reviewers' on one metric."""
    if t.overlap is None:
        return _cell(
            None,
            "num1",
            f"{j.label} on {m}: top-k overlap not computable: {t.reason}.",
            n=t.n_ideas,
            reason=t.reason,
        )
    expected = cell_number(t.expected_by_chance, "num1")
    cell = _cell(
        t.overlap,
        "num1",
        f"{j.label} on {m}: of the humans' {t.k} best ideas (by mean score) among "
        f"n = {t.n_ideas} ideas, the expected number also among the judge's {t.k} "
        f"best (ties at the cut broken at random); chance {expected}; "
        f"hypergeometric p = {_p(t.p_value)}.",
        n=t.n_ideas,
    )
    cell["k"] = t.k
    return cell


def _chance_cell(m: str, c: dict[str, Any]) -> dict[str, Any]:
    """What a random ranking's Spearman rho with the human means is by chance, on one
    metric (`agreement.chance_agreement`): the mean and the central range, no CI."""
    if c["reason"] is not None:
        return _cell(
            None,
            "num3",
            f"Random ranking (chance) on {m}: not computable: {c['reason']}.",
            n=c["n_ideas"],
            reason=c["reason"],
        )
    # The sentence writes its numbers as the table cell does (num3), so both read alike.
    s, k = c["spearman"], c["kendall"]
    s_mean, s_low, s_high = (
        signed_text(cell_number(s[k], "num3")) for k in ("mean", "low", "high")
    )
    k_mean, k_low, k_high = (
        signed_text(cell_number(k[j], "num3")) for j in ("mean", "low", "high")
    )
    share = percent_text(c["confidence"], 0)
    how = (
        f"Random ranking (chance) on {m}: over {c['n_rankings']:,} independent uniformly "
        f"random rankings of the n = {c['n_ideas']} ideas with a human score (seed "
        f"{c['seed']}), mean Spearman ρ with the mean human score per idea {s_mean}, "
        f"{share} of random rankings between {s_low} and {s_high}; Kendall "
        f"τ-b mean {k_mean}, {share} between {k_low} and {k_high}. "
        "This is chance, not a judge: no CI and no p-value."
    )
    return _cell(s["mean"], "num3", how, n=c["n_ideas"], chance_range=(s["low"], s["high"]))


def _correlation_table(
    out: dict[str, Any],
    results: Sequence[tuple[JudgeData, JudgeAgreement]],
    cols: list[dict[str, str]],
) -> dict[str, Any]:
    """Rank correlation of each judge with the human mean per idea, below what random
    rankings give by chance."""
    table = _judge_metric_table(
        results,
        cols,
        table_id="correlation",
        title="Rank correlation with the human mean per idea (Spearman ρ)",
        caption="Kendall τ-b and Pearson r with their CIs are in report.json and "
        "agreement.csv. No human–human row: a split-half ρ is not the same quantity. The "
        "random-ranking row is what chance gives: the mean ρ of many uniformly random "
        "rankings of the ideas and, after it, the range holding 95 % of them.",
        figures=lambda res: None if res.absolute is None else res.absolute.by_metric,
        cell=_correlation_cell,
    )
    chance = out.get("chance") or {}
    if chance:
        cells = {m: _chance_cell(m, c) for m, c in chance.items()}
        table["rows"].insert(
            0, _row("baseline_random", "Random ranking (chance)", "baseline", cells)
        )
    return table


def _top_k_table(
    results: Sequence[tuple[JudgeData, JudgeAgreement]], cols: list[dict[str, str]]
) -> dict[str, Any]:
    """Overlap of each judge's top ideas with the reviewers' top ideas."""
    return _judge_metric_table(
        results,
        cols,
        table_id="top_k",
        title="Top-25 % overlap with the reviewers' best ideas (as Si et al. Table 12)",
        caption="Expected overlap of the two top-k sets; k is a quarter of the ideas both scored.",
        figures=lambda res: res.top_k,
        cell=_top_k_cell,
    )


def _pairwise_judge_cells(name: str, dim: str, block: dict[str, Any]) -> dict[str, Any]:
    """One judge's pairwise cells on one dimension, against ratings and means."""
    vr, vm = block["vs_human_ratings"], block["vs_human_means"]
    cells: dict[str, Any] = {}
    if vr.get("with_ties"):
        n = vr["n"]
        cells["ratings_acc"] = _cell(
            vr["with_ties"]["accuracy"],
            "pct",
            f"{name}: share of the {n} reviewer pair ratings (of {vr['n_pairs']} judged "
            "pairs) whose choice (either idea or tie) equals the judge's preference, "
            "summed over both orders.",
            n=n,
            reason=vr.get("reason"),
        )
        cells["ratings_kappa"] = _cell(
            vr["with_ties"]["kappa"],
            "num3",
            f"{name}: Cohen's κ over the same {n} ratings, three labels, each item "
            "counted in both orientations of the pair.",
            n=n,
        )
        nd = vr["without_ties"]["n"]
        cells["ratings_acc_nt"] = _cell(
            vr["without_ties"]["accuracy"],
            "pct",
            f"{name}: accuracy over the {nd} ratings where neither the judge nor the "
            f"reviewer said tie ({vr['without_ties']['n_dropped']} dropped).",
            n=nd,
        )
    else:
        for key in ("ratings_acc", "ratings_kappa", "ratings_acc_nt"):
            cells[key] = _cell(None, "pct", f"{name}: {vr.get('reason')}.", reason=vr.get("reason"))
    if vm.get("with_ties"):
        n = vm["n"]
        cells["means_acc"] = _cell(
            vm["with_ties"]["accuracy"],
            "pct",
            f"{name}: share of {n} judged pairs whose two ideas have reviews where the "
            "judge's preference equals the idea with the higher human mean on "
            f"{dim} (equal means = tie).",
            n=n,
            reason=vm.get("reason"),
        )
        cells["means_kappa"] = _cell(
            vm["with_ties"]["kappa"],
            "num3",
            f"{name}: Cohen's κ over the same {n} pairs, each counted in both orientations.",
            n=n,
        )
    else:
        for key in ("means_acc", "means_kappa"):
            cells[key] = _cell(None, "pct", f"{name}: {vm.get('reason')}.", reason=vm.get("reason"))
    return cells


def _pairwise_ceiling_row(dim: str, hh: dict[str, Any]) -> dict[str, Any]:
    """The reviewer-vs-reviewer row of the pairwise table."""
    n = hh["n"]
    return _row(
        "ceiling",
        f"Human ceiling ({dim}: reviewer vs. reviewer)",
        "ceiling",
        {
            "ratings_acc": _cell(
                hh["with_ties"]["accuracy"],
                "pct",
                f"Human–human: over {hh['n_pairs']} pairs rated by two or more "
                f"reviewers, the share of the {n} reviewer couples choosing the "
                "same (either idea or tie).",
                n=n,
                reason=hh.get("reason"),
            ),
            "ratings_kappa": _cell(
                hh["with_ties"]["kappa"],
                "num3",
                f"Human–human Cohen's κ over the same {n} couples, both rater "
                "orders and both pair orientations.",
                n=n,
            ),
            "ratings_acc_nt": _cell(
                hh["without_ties"]["accuracy"],
                "pct",
                f"Human–human accuracy over the {hh['without_ties']['n']} couples "
                "where neither said tie.",
                n=hh["without_ties"]["n"],
            ),
        },
    )


def _pairwise_table(
    out: dict[str, Any], results: Sequence[tuple[JudgeData, JudgeAgreement]]
) -> dict[str, Any]:
    """Pairwise verdicts of each judge against reviewer ratings and means."""
    pcols = [
        {"key": "ratings_acc", "label": "vs. ratings: accuracy"},
        {"key": "ratings_kappa", "label": "κ"},
        {"key": "ratings_acc_nt", "label": "accuracy, no ties"},
        {"key": "means_acc", "label": "vs. means: accuracy"},
        {"key": "means_kappa", "label": "κ"},
    ]
    rows = []
    hh_done = False
    for j, res in results:
        for dim, block in (res.pairwise.by_dimension if res.pairwise else {}).items():
            name = f"{j.label} ({dim})"
            cells = _pairwise_judge_cells(name, dim, block)
            rows.append(_row(f"{j.key}:{dim}", name, _kind(j), cells))
            hh = block.get("human_human") or {}
            if not hh_done and hh.get("with_ties"):
                hh_done = True
                rows.insert(0, _pairwise_ceiling_row(dim, hh))
    return {
        "id": "pairwise",
        "title": "Pairwise verdicts against the reviewers",
        "caption": "The judge's preference per pair is its verdicts summed over both "
        "orders (a verdict that flips with the order is a tie). "
        + (
            ""
            if out["human_pairs"]["n_ratings"]
            else "The study has no reviewer pair ratings, so only the comparison with "
            "human means is possible."
        ),
        "columns": pcols,
        "rows": rows,
    }


def _diagnostics_table(results: Sequence[tuple[JudgeData, JudgeAgreement]]) -> dict[str, Any]:
    """Position and length biases, parse failures and cost of each stored run."""
    dcols = [
        {"key": "position", "label": "position consistency"},
        {"key": "first", "label": "first-position wins"},
        {"key": "longer", "label": "longer-text wins"},
        {"key": "unparseable", "label": "unparseable"},
        {"key": "cost", "label": "cost per idea"},
    ]
    rows = []
    for j, res in results:
        if j.computed:
            continue
        cells = {}
        pw, direct = res.diagnostics.pairwise, res.diagnostics.direct
        if pw:
            pos, first, longer = (
                pw["position_consistency"],
                pw["first_position_win_rate"],
                pw["longer_text_win_rate"],
            )
            cells["position"] = _cell(
                pos.get("consistency"),
                "pct",
                f"{j.label}: share of the {pos['n']} pairs judged in both orders (both verdicts "
                "parseable) where the two verdicts name the same winner or both say tie.",
                n=pos["n"],
                reason=pos.get("reason"),
            )
            cells["first"] = _cell(
                first.get("rate"),
                "pct",
                f"{j.label}: share of the {first['n']} decisive verdicts won by the idea shown "
                f"first; binomial p = {_p(first.get('p_value'))} against 50 %.",
                n=first["n"],
                reason=first.get("reason"),
            )
            cells["longer"] = _cell(
                longer.get("rate"),
                "pct",
                f"{j.label}: share of the {longer['n']} decisive verdicts between texts of "
                f"unequal length won by the longer text; p = {_p(longer.get('p_value'))}."
                if longer.get("rate") is not None
                else f"{j.label}: longer-text win rate {longer['reason']}.",
                n=longer["n"],
                reason=longer.get("reason"),
            )
        src = pw or direct or {}
        n_all = src.get("n_verdicts", src.get("n_rows"))
        cells["unparseable"] = _cell(
            src.get("unparseable_rate"),
            "pct",
            f"{j.label}: share of its {n_all} "
            + ("verdicts" if pw else "score rows")
            + " that could not be parsed.",
            n=n_all,
        )
        cost = src.get("cost_per_idea") or {}
        cells["cost"] = _cell(
            cost.get("value"),
            "money",
            f"{j.label}: total cost of the calls this run paid for "
            f"({fixed(cost.get('total_cost') or 0, 4)}) over the {cost.get('n_ideas')} ideas it judged."
            if cost.get("value") is not None
            else f"{j.label}: cost per idea {cost.get('reason')}.",
            n=cost.get("n_ideas"),
            reason=cost.get("reason"),
        )
        rows.append(_row(j.key, j.label, _kind(j), cells))
    return {
        "id": "diagnostics",
        "title": "Judge diagnostics",
        "caption": "Biases and failure rates of each stored run.",
        "columns": dcols,
        "rows": rows,
    }


def _krippendorff_table(
    out: dict[str, Any],
    results: Sequence[tuple[JudgeData, JudgeAgreement]],
    metrics: list[str],
    cols: list[dict[str, str]],
) -> dict[str, Any]:
    """Krippendorff's α among the reviewers, and with each judge as one more rater on the
    metrics it scored (`agreement.krippendorff_with_judges` leaves out the others)."""
    from . import agreement as ag

    rows = []
    cells = {}
    for m in metrics:
        h = out["krippendorff"][m]["humans"]
        cells[m] = _cell(
            h["alpha"],
            "num3",
            f"Krippendorff's α (ordinal) among the reviewers on {m}: units = ideas, each review "
            f"once, {h['n_units']} ideas with two or more reviews ({h['n_values']} values).",
            n=h["n_units"],
            reason=h.get("reason"),
        )
    rows.append(_row("ceiling", "Reviewers only", "ceiling", cells))
    keys = {j.key: j for j, _ in results}
    for key, j in keys.items():
        cells = {}
        for m in metrics:
            b = out["krippendorff"][m]["judges"].get(key)
            if b is None:
                continue
            cells[m] = _cell(
                b["alpha"],
                "num3",
                f"α with {j.label} added as one more rater on {m}: {b['n_units']} ideas, "
                f"{b['n_values']} values; change from the reviewers' α "
                + ("–" if b["delta"] is None else _signed(b["delta"], 3))
                + (
                    " (judge values outside the reviewers' range)"
                    if b["outside_human_range"]
                    else ""
                )
                + ".",
                n=b["n_units"],
                reason=b.get("reason"),
            )
        if cells:
            rows.append(_row(key, f"+ {j.label}", _kind(j), cells))
    left_out = any(out["krippendorff"][m].get("left_out") for m in metrics)
    return {
        "id": "krippendorff",
        "title": "Krippendorff's α (ordinal), reviewers and each judge as one more rater",
        "caption": "A judge has an α only on the metrics it scored per idea, for at least "
        f"{ag.MIN_IDEAS} reviewed ideas: ranking-only runs (pairwise, Swiss, active "
        "Bradley–Terry) have none on the metrics they did not compare."
        if left_out
        else "",
        "columns": cols,
        "rows": rows,
    }


def agreement_rows(report: dict[str, Any]) -> pd.DataFrame:
    """The agreement tables in long form: one row per number, with its n and sentence."""
    recs = []
    for table in (report.get("agreement") or {}).get("tables", []):
        labels = {c["key"]: c["label"] for c in table["columns"]}
        for row in table["rows"]:
            for col, cell in row["cells"].items():
                recs.append(
                    {
                        "table": table["id"],
                        "row": row["key"],
                        "row_label": row["label"],
                        "kind": row["kind"],
                        "column": col,
                        "column_label": labels.get(col, col),
                        "value": cell["value"],
                        "ci_low": cell["ci_low"],
                        "ci_high": cell["ci_high"],
                        "range_low": cell.get("range_low"),
                        "range_high": cell.get("range_high"),
                        "n": cell["n"],
                        "how": cell["how"],
                        "reason": cell["reason"],
                    }
                )
    cols = [
        "table",
        "row",
        "row_label",
        "kind",
        "column",
        "column_label",
        "value",
        "ci_low",
        "ci_high",
        "range_low",
        "range_high",
        "n",
        "how",
        "reason",
    ]
    return pd.DataFrame(recs, columns=cols)
