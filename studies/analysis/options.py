"""The report's options: resampling counts, seeds and model choices (`ReportOptions`)."""

from __future__ import annotations

from dataclasses import dataclass


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
    # Each judge run's reliability panel (calibration, style control, self-preference,
    # repetition): bootstrap resamples of its intervals, on the run's page as in the report.
    panel_bootstrap: int = 400
    # The ordinal check (cumulative-link mixed model): "all" metrics, the "primary" one
    # (consistency_metric) or "none". Past ordinal_all_max_rows only the primary metric is
    # fitted (on every row: its reviewer block is sparse, so no size is refused).
    ordinal: str = "all"
    ordinal_all_max_rows: int = 1500
