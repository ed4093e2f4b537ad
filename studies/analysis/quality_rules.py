"""The quality flags' names and the plan's rules about them (thresholds, exclusion
rules): what the analysis plan stores, apart from the flags' arithmetic
(`studies.analysis.quality`), so the plan can hold them.

Pure module: no Django imports.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FLAG_KINDS", "UNITS", "ExclusionRule", "QualityRules"]

#: Every flag: name -> what it means (the report and the progress page show these).
FLAG_KINDS = {
    "fast": "measured time below the floor",
    "straight_line": "the same score on every metric",
    "duplicate_own": "a rationale nearly identical to one in another of the reviewer's reviews",
    "duplicate_other": "a rationale nearly identical to another reviewer's",
    "attention": "an attention check answered other than instructed",
    "gold": "a gold idea scored outside its expected range",
    "rejected": "rejected for payment by the study team",
}
UNITS = ("review", "reviewer")


@dataclass(frozen=True)
class ExclusionRule:
    """Remove the reviews flagged ``flag`` (unit ``review``) or every review of a
    reviewer with such a flag (unit ``reviewer``)."""

    flag: str
    unit: str = "review"

    @property
    def name(self) -> str:
        return self.flag if self.unit == "review" else f"{self.flag} (whole reviewer)"


@dataclass(frozen=True)
class QualityRules:
    """The flags' thresholds and the exclusion rules: the plan's ``quality`` section."""

    min_minutes: float = 2.0
    straight_line_items: int = 3  # a form with fewer metrics cannot straight-line
    duplicate_cosine: float = 0.95
    duplicate_min_words: int = 8  # shorter rationales ("N/A", "Good idea.") are not compared
    exclude: tuple[ExclusionRule, ...] = ()
