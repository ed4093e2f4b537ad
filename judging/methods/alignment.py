"""A rating judge's agreement with reviewers' pair ratings (LigBench's human-alignment table).

LigBench compares each idea with reference papers, never two of the study's ideas with
each other. Where reviewers rated a pair of ideas on a dimension, the judge's preference
on that pair is the order of its two scores on the same dimension (equal or missing
scores: a tie, resp. no preference). The result has the columns of a pairwise judge's
outcomes, so the report's pairwise agreement reads it like any other judge's verdicts.
Pure pandas; the agreement statistics are `studies.analysis.agreement`'s.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from studies.analysis.agreement import human_pair_winners, label_agreement

__all__ = ["alignment_table", "preferences_from_scores"]

PAIR_COLUMNS = ["idea_a", "idea_b", "first_shown", "verdict", "dimension", "round", "cost"]


def preferences_from_scores(scores: pd.DataFrame, human_pairs: pd.DataFrame) -> pd.DataFrame:
    """One derived verdict per (rated pair, dimension) that both ideas have scores on.

    `scores`: idea_id, metric, score (NaN = no score); `human_pairs`: idea_a, idea_b,
    dimension (as `studies.selectors.human_pair_frame`). Verdict "A" means idea_a.
    """
    known = scores.dropna(subset=["score"]).groupby(["idea_id", "metric"])["score"].mean()
    rows = []
    for a, b, dim in (
        human_pairs[["idea_a", "idea_b", "dimension"]].drop_duplicates().itertuples(index=False)
    ):
        sa, sb = known.get((a, dim)), known.get((b, dim))
        if sa is None or sb is None:
            continue
        verdict = "A" if sa > sb else "B" if sb > sa else "tie"
        rows.append(
            {
                "idea_a": a,
                "idea_b": b,
                "first_shown": a,
                "verdict": verdict,
                "dimension": dim,
                "round": 0,
                "cost": 0.0,
            }
        )
    return pd.DataFrame(rows, columns=PAIR_COLUMNS)


def alignment_table(scores: pd.DataFrame, human_pairs: pd.DataFrame) -> list[dict[str, Any]]:
    """Per dimension reviewers rated: accuracy and κ of the score order against each rating
    (with and without ties), and how many ratings had no judge scores to compare."""
    winners = human_pair_winners(human_pairs)
    derived = preferences_from_scores(scores, human_pairs)
    preferred: dict[tuple[Any, Any, Any], Any] = {}
    for a, b, verdict, dim in derived[["idea_a", "idea_b", "verdict", "dimension"]].itertuples(
        index=False
    ):
        winner = a if verdict == "A" else b if verdict == "B" else None
        preferred[(a, b, dim)] = preferred[(b, a, dim)] = winner
    out = []
    for dim in dict.fromkeys(winners["dimension"]):
        judge, human, unmatched = [], [], 0
        for w in winners[winners["dimension"] == dim].itertuples(index=False):
            if (w.x, w.y, dim) not in preferred:
                unmatched += 1
                continue
            winner = preferred[(w.x, w.y, dim)]
            judge.append("x" if winner == w.x else "y" if winner == w.y else "tie")
            human.append(w.winner)
        block = label_agreement(judge, human)
        out.append(
            {"dimension": dim, "n_ratings": len(judge), "unmatched": unmatched, **block.as_dict()}
        )
    return out
