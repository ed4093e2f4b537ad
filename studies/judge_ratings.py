"""The judge ratings the report needs, through an interface studies defines.

Studies never imports judging's runs or methods (docs/architecture.md, "Interfaces studies defines").
The report asks the registered provider for every finished judge run of a study as
agreement inputs (`JudgeData`), for each judge config's reliability panel pooled over
its finished runs in the study, and for whether each no-LLM baseline could run on the
study. The judging app registers its provider when it starts (`AppConfig.ready`); with
no provider registered the report simply has no stored judges.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .analysis.report import JudgeData
    from .models import Study


class JudgeRatingsProvider(Protocol):
    def judge_inputs(
        self, study: Study, metrics: Sequence[str], *, panel_bootstrap: int
    ) -> list[JudgeData]:
        """Every finished judge run of the study that judged its ideas, as agreement
        inputs: per-idea scores on the given form metrics and/or pairwise outcomes, each
        with its reliability panel at `panel_bootstrap` resamples."""
        ...

    def config_panels(self, study: Study, *, panel_bootstrap: int) -> list[dict[str, Any]]:
        """One entry per judge config a finished run of the study used (as its judge or a
        panel member): its reliability panel pooled over those runs at `panel_bootstrap`
        resamples, as `agreement.judge_configs` documents it (docs/report-schema.md)."""
        ...

    def baseline_availability(self, study: Study) -> dict[str, str | None]:
        """Per no-LLM baseline method: None if it can run on this study, else why not."""
        ...


_providers: list[JudgeRatingsProvider] = []


def register_provider(provider: JudgeRatingsProvider) -> None:
    """Install the provider (the last registered one answers; registering the same
    provider again is a no-op, so a repeated `ready()` does not duplicate it)."""
    if provider not in _providers:
        _providers.append(provider)


def judge_ratings_provider() -> JudgeRatingsProvider | None:
    return _providers[-1] if _providers else None
