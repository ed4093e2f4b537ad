"""Fixtures for the pure analysis tests.

`si2024_frame` reads the released Si et al. file directly with a few lines of pandas, on
purpose independent of the importer: a separate test checks that the frame built from the
database after `import_reviews` equals this one on every analysed column.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pandas as pd
import pytest

# The repository ships the release (MIT) under data/si2024, so tests need nothing outside it.
SI2024_DIR = Path(__file__).resolve().parents[2] / "data" / "si2024"
METRICS = ["novelty", "excitement", "feasibility", "effectiveness", "overall"]


def load_si2024_frame(path: Path = SI2024_DIR / "ideation_reviews.json") -> pd.DataFrame:
    raw = json.loads(path.read_text())
    df = pd.DataFrame(raw)
    content_cols = [c for c in raw if c not in ("condition", "idea_id", "topic")]
    # Rows that are byte-identical apart from their condition/idea id are one review.
    df["review_id"] = [
        hashlib.sha1(json.dumps([raw[c][i] for c in content_cols]).encode()).hexdigest()[:12]
        for i in range(len(df))
    ]
    df["source_idea_id"] = df["idea_id"].str.replace(" ", "", regex=False)
    # An AI_Rerank idea whose reviews are all copies of one AI idea's is that idea.
    first_id = df.sort_values("condition").groupby("review_id")["source_idea_id"].first()
    canon = {}
    for src, grp in df.groupby("source_idea_id"):
        owners = {first_id[r] for r in grp["review_id"]}
        canon[src] = owners.pop() if len(owners) == 1 else src
    df["idea_id"] = df["source_idea_id"].map(canon)
    for m in METRICS:
        df[m] = df[f"{m}_score"].astype(float)
    df["confidence"] = df["confidence_score"].astype(float)
    df["familiarity"] = df["familiarity"].str.extract(r"^\s*(\d)")[0].astype(float)
    df["minutes"] = [
        float(m.group(0)) if (m := re.search(r"\d+(\.\d+)?", str(x))) else float("nan")
        for x in df["minutes"]
    ]
    df["rationale_words"] = sum(
        df[f"{m}_rationale"].fillna("").str.split().str.len() for m in METRICS
    )
    df["flagged"] = (df["consent"] != "yes") | (df["no_ai"] != "yes")
    df["reviewer_id"] = None
    df["row_id"] = range(len(df))
    cols = [
        "row_id",
        "review_id",
        "idea_id",
        "source_idea_id",
        "condition",
        "topic",
        "reviewer_id",
        *METRICS,
        "familiarity",
        "confidence",
        "minutes",
        "rationale_words",
        "flagged",
    ]
    return df[cols].copy()


@pytest.fixture(scope="session")
def si2024_frame() -> pd.DataFrame:
    if not SI2024_DIR.exists():
        pytest.fail(f"the si2024 data is missing at {SI2024_DIR}")
    return load_si2024_frame()
