#!/usr/bin/env python3
"""Write a SYNTHETIC file shaped like the released execution-phase reviews.

The execution study of Si, Hashimoto and Yang ("The Ideation–Execution Gap: Execution
Outcomes of LLM-Generated versus Human Research Ideas") released its reviews as one JSON
object of parallel columns: timestamp, consent, no_ai, familiarity, experience,
``<metric>_score`` and ``<metric>_rationale`` for novelty, excitement, soundness,
effectiveness, overall and faithfulness (1-10), ``codebase_quality`` (1-5, no rationale),
confidence_score, minutes, topic, condition and idea_id: 181 reviews of 43 ideas whose ids
are ideation ids. That file is not shipped here. This script writes a stand-in of exactly
that shape for tests and demos: the ids, topics and conditions are real ideation ids from
``data/si2024/`` (19 Human and 24 AI ideas, as the study executed), every score and text is
generated, and no number in it is the study's.

Scores on the four metrics the ideation form shares are drawn around each idea's ideation
mean, shifted by a fixed drop per condition (AI ideas lose more, by construction), so a
phase comparison on it has a known direction. Deterministic: numpy's legacy RandomState
(whose stream is frozen) from a fixed seed; `tests/analysis/test_phases.py` checks the
committed file is this script's output.

    python scripts/synthetic_execution_release.py [--out PATH]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
IDEATION = ROOT / "data" / "si2024" / "ideation_reviews.json"
OUT = ROOT / "tests" / "data" / "synthetic_execution_release.json"
SEED = 20250625
N_IDEAS = {"Human": 19, "AI": 24}
N_REVIEWS = 181
SHARED = ("novelty", "excitement", "effectiveness", "overall")
#: The synthetic change of every shared metric, per condition (execution minus ideation).
DROP = {"Human": -0.4, "AI": -1.4}
COLUMNS = (
    "timestamp", "consent", "no_ai", "familiarity", "experience",
    "novelty_score", "novelty_rationale", "excitement_score", "excitement_rationale",
    "soundness_score", "soundness_rationale", "effectiveness_score", "effectiveness_rationale",
    "overall_score", "overall_rationale", "faithfulness_score", "faithfulness_rationale",
    "codebase_quality", "confidence_score", "minutes", "topic", "condition", "idea_id",
)  # fmt: skip
FAMILIARITY = {
    1: "1 (synthetic: new to the topic)",
    2: "2 (synthetic: has read a paper on the topic)",
    3: "3 (synthetic: has read several papers on the topic)",
    4: "4 (synthetic: has co-authored a paper on the topic)",
    5: "5 (synthetic: has led papers on the topic)",
}


def ideation_ideas() -> dict[str, dict[str, Any]]:
    """Per ideation id of a Human or AI idea: its condition, topic and shared-metric means."""
    raw = json.loads(IDEATION.read_text())
    ideas: dict[str, dict[str, Any]] = {}
    for i, raw_id in enumerate(raw["idea_id"]):
        cond = raw["condition"][i]
        if cond not in N_IDEAS:
            continue
        idea = ideas.setdefault(
            raw_id.replace(" ", ""),
            {"condition": cond, "topic": raw["topic"][i], "scores": {m: [] for m in SHARED}},
        )
        for m in SHARED:
            idea["scores"][m].append(float(raw[f"{m}_score"][i]))
    for idea in ideas.values():
        idea["means"] = {m: float(np.mean(v)) for m, v in idea.pop("scores").items()}
    return ideas


def _score(rng: np.random.RandomState, centre: float, sd: float, hi: int = 10) -> int:
    return int(np.clip(np.rint(centre + rng.normal(0.0, sd)), 1, hi))


def _review(
    rng: np.random.RandomState, idea_id: str, idea: dict[str, Any], k: int
) -> dict[str, Any]:
    cond = idea["condition"]
    shift = DROP[cond] + rng.normal(0.0, 0.5)  # each idea's own change around its condition's
    row: dict[str, Any] = {
        "timestamp": f"{rng.randint(1, 29):02d}/{rng.randint(2, 7):02d}/2025 "
        f"{rng.randint(0, 24):02d}:{rng.randint(0, 60):02d}:{rng.randint(0, 60):02d}",
        "consent": "yes",
        "no_ai": "yes",
        "familiarity": FAMILIARITY[int(rng.randint(2, 6))],
        "experience": "yes",
    }
    for m in ("novelty", "excitement", "soundness", "effectiveness", "overall", "faithfulness"):
        if m in SHARED:
            value = _score(rng, idea["means"][m] + shift, 1.2)
        else:
            value = _score(rng, 7.0 if m == "faithfulness" else 5.0, 1.6)
        row[f"{m}_score"] = value
        row[f"{m}_rationale"] = (
            f"Synthetic {m} rationale {k + 1} for {idea_id}: generated text, not a review."
        )
    row["codebase_quality"] = _score(rng, 3.0, 1.0, hi=5)
    row["confidence_score"] = int(rng.randint(2, 6))
    row["minutes"] = int(rng.choice([20, 30, 40, 45, 50, 60, 75, 90, 120]))
    row.update(topic=idea["topic"], condition=cond, idea_id=idea_id)
    return row


def build() -> dict[str, list[Any]]:
    """The synthetic release as columns (the order of the released file's keys)."""
    rng = np.random.RandomState(SEED)
    ideas = ideation_ideas()
    chosen: list[str] = []
    for cond, n in N_IDEAS.items():
        pool = sorted(i for i, v in ideas.items() if v["condition"] == cond)
        chosen += [str(i) for i in rng.choice(pool, n, replace=False)]
    counts = np.full(len(chosen), N_REVIEWS // len(chosen))
    counts[rng.choice(len(chosen), N_REVIEWS - counts.sum(), replace=False)] += 1
    order = rng.permutation(len(chosen))
    rows = [_review(rng, chosen[j], ideas[chosen[j]], k) for j in order for k in range(counts[j])]
    # One reviewer declined the no-AI pledge, as happens in real files: the import flags it.
    rows[7]["no_ai"] = "no"
    return {c: [r[c] for r in rows] for c in COLUMNS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(build(), indent=4) + "\n")
    print(f"wrote {args.out} ({N_REVIEWS} synthetic reviews)")


if __name__ == "__main__":
    main()
