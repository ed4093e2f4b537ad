"""Simulated review data for the analysis tests: crossed designs with known effects."""

from __future__ import annotations

import numpy as np
import pandas as pd


def simulate_crossed(
    *,
    n_ideas: int = 60,
    n_reviewers: int = 30,
    n_topics: int = 4,
    reviews_per_idea: int = 3,
    effects: tuple[float, float, float] = (0.0, 0.5, 0.8),
    sd_topic: float = 0.3,
    sd_reviewer: float = 0.7,
    sd_idea: float = 0.5,
    sd_resid: float = 1.5,
    seed: int = 0,
) -> pd.DataFrame:
    """Ideas (each in one condition and topic) rated by random distinct reviewers."""
    rng = np.random.default_rng(seed)
    conds = np.array(["Human", "AI", "AI_Rerank"])
    idea_cond = np.arange(n_ideas) % 3
    idea_topic = rng.integers(0, n_topics, n_ideas)
    u_t = rng.normal(0, sd_topic, n_topics)
    u_r = rng.normal(0, sd_reviewer, n_reviewers)
    u_i = rng.normal(0, sd_idea, n_ideas)
    rows = []
    for i in range(n_ideas):
        for r in rng.choice(n_reviewers, reviews_per_idea, replace=False):
            y = (
                5.0
                + effects[idea_cond[i]]
                + u_t[idea_topic[i]]
                + u_r[r]
                + u_i[i]
                + rng.normal(0, sd_resid)
            )
            rows.append((f"I{i}", conds[idea_cond[i]], f"T{idea_topic[i]}", f"R{r}", y))
    df = pd.DataFrame(rows, columns=["idea_id", "condition", "topic", "reviewer_id", "score"])
    df["review_id"] = [f"v{j}" for j in range(len(df))]
    return df
