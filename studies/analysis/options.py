"""The report's options: resampling counts, seeds and model choices (`ReportOptions`)."""

from __future__ import annotations

from dataclasses import dataclass

#: Uniformly random rankings drawn for the agreement section's chance baseline
#: (`agreement.chance_agreement`) unless the report's options ask for another count.
CHANCE_RANKINGS = 2000
#: The counts a report may ask for: below, the central 95 % range rests on a handful of
#: rankings in each tail; above, the rankings (count x ideas numbers) cost memory and time
#: for no visible gain in the range's three decimals.
CHANCE_RANKINGS_MIN = 200
CHANCE_RANKINGS_MAX = 20_000


def chance_rankings_problem(value: object, where: str) -> str | None:
    """Why `value` cannot be the count of chance rankings (named `where` in the message);
    None when it can."""
    low, high = CHANCE_RANKINGS_MIN, CHANCE_RANKINGS_MAX
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        return f"{where}: must be a whole number from {low:,} to {high:,}, got {value!r}"
    return None


@dataclass(frozen=True)
class ReportOptions:
    consistency_splits: int = 1000
    consistency_bootstrap: int = 1000
    consistency_permutations: int = 1000
    consistency_metric: str = "overall"
    seed: int = 20240906
    mixed_starts: int = 3
    mixed_engine: str = "auto"
    mixed_reml: bool = True
    # Refit every main model with R's lme4 (needs Rscript + lme4) and report the gaps.
    crosscheck_lme4: bool = False
    # Human-LLM agreement: draws per judge and metric. Big studies want fewer (the cost
    # grows with ideas x draws x judges x metrics).
    agreement_splits: int = 200
    agreement_bootstrap: int = 200
    agreement_permutations: int = 200
    # Random rankings behind the agreement section's chance baseline (its mean and central
    # 95 % range), from CHANCE_RANKINGS_MIN to CHANCE_RANKINGS_MAX.
    chance_rankings: int = CHANCE_RANKINGS
    # Each judge run's reliability panel (calibration, style control, self-preference,
    # repetition): bootstrap resamples of its intervals, on the run's page as in the report.
    panel_bootstrap: int = 400
    # The ordinal check (cumulative-link mixed model): "all" metrics, the "primary" one
    # (consistency_metric) or "none". Past ordinal_all_max_rows only the primary metric is
    # fitted (on every row: its reviewer block is sparse, so no size is refused).
    ordinal: str = "all"
    ordinal_all_max_rows: int = 1500

    def __post_init__(self) -> None:
        problem = chance_rankings_problem(self.chance_rankings, "chance_rankings")
        if problem is not None:
            raise ValueError(problem)
