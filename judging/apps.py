from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig


class JudgingConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "judging"
    verbose_name = "LLM judges"

    def ready(self) -> None:
        # Studies defines the interfaces it reads judging through (its report's judge
        # ratings, the step list's run counts, the package's and the study file's
        # sections, the demo's judges); judging fills them here, so studies never
        # imports judging's runs or methods. What fills them is imported on first use
        # (below): a worker or a command that never builds a report starts without the
        # analysis, pandas and scipy.
        from studies.demo_judging import demo_judging_register
        from studies.judge_ratings import register_provider
        from studies.overview import judge_run_counter_register
        from studies.package_sections import package_section_register

        from . import tasks  # noqa: F401  (registers the judge-run task with studies.jobs)
        from .run_counts import study_judge_run_counts

        register_provider(RATINGS_ON_USE)
        judge_run_counter_register(study_judge_run_counts)
        package_section_register("judges", judges_section_on_use)
        demo_judging_register(DEMO_ON_USE)
        _register_transfer()


class _RatingsOnUse:
    """The report's judge ratings (`judging.services.ratings`), imported when asked."""

    def judge_inputs(self, study: Any, metrics: Sequence[str], *, panel_bootstrap: int) -> Any:
        from .services.ratings import RUN_RATINGS

        return RUN_RATINGS.judge_inputs(study, metrics, panel_bootstrap=panel_bootstrap)

    def config_panels(self, study: Any, *, panel_bootstrap: int) -> list[dict[str, Any]]:
        from .services.ratings import RUN_RATINGS

        return RUN_RATINGS.config_panels(study, panel_bootstrap=panel_bootstrap)

    def baseline_availability(self, study: Any) -> dict[str, str | None]:
        from .services.ratings import RUN_RATINGS

        return RUN_RATINGS.baseline_availability(study)


class _DemoOnUse:
    """The demo's judges (`judging.demo`), imported when the demo is built."""

    def scripted_server(self) -> Any:
        from .demo import DEMO_JUDGING

        return DEMO_JUDGING.scripted_server()

    def judges_run(self, *args: Any, **kwargs: Any) -> Any:
        from .demo import DEMO_JUDGING

        return DEMO_JUDGING.judges_run(*args, **kwargs)


def judges_section_on_use(out: Any) -> None:
    """The package's `judges/` folder (`judging.package_section`), imported when written."""
    from .package_section import judges_section

    judges_section(out)


RATINGS_ON_USE = _RatingsOnUse()
DEMO_ON_USE = _DemoOnUse()


def _register_transfer() -> None:
    """Judging's part of a study file (studies.services.transfer defines the sections): its runs,
    their calls and outcomes, and the configs and corpora they used, by natural key."""
    from django.db.models import Q

    from studies.models import NormalizationResult
    from studies.services.transfer_sections import (
        transfer_section_register,
        transfer_shared_register,
    )

    from . import models as j

    def shared_fields(model: Any, *key: str) -> tuple[str, ...]:
        return tuple(
            f.name for f in model._meta.concrete_fields if not f.primary_key and f.name not in key
        )

    # A researcher's own key stays on this installation: a moved config arrives without it.
    # A judge is named within its study (study rows keep their ids), or is the
    # administrator's (no study): the name alone would find another team's judge.
    transfer_shared_register(
        j.JudgeConfig,
        key=("study_id", "name"),
        fields=shared_fields(j.JudgeConfig, "name", "study", "endpoint_key"),
    )
    # A corpus's name is unique per owner (or among the shared ones, which have none): by
    # name alone, an import would find another researcher's corpus of that name.
    transfer_shared_register(
        j.ReferenceCorpus,
        key=("created_by", "name"),
        fields=shared_fields(j.ReferenceCorpus, "created_by", "name"),
        legacy_key=("name",),
    )
    # A run names its corpus by id in its parameters (a resume reads it) and its summary.
    transfer_section_register(
        j.JudgeRun,
        lambda s: j.JudgeRun.objects.filter(study=s),
        json_refs=(
            ("params", "corpus", j.ReferenceCorpus),
            ("summary", "corpus", j.ReferenceCorpus),
        ),
    )
    transfer_section_register(
        j.LLMCall,
        lambda s: j.LLMCall.objects.filter(
            Q(study=s)
            | Q(run__study=s)
            | Q(pk__in=NormalizationResult.objects.filter(idea__study=s).values("call"))
            | Q(pk__in=_leakage_call_ids(s))
        ),
    )
    for model in (j.PanelMember, j.Judgment, j.PairwiseOutcome, j.IdeaRating, j.Formalisation):
        transfer_section_register(model, lambda s, model=model: model.objects.filter(run__study=s))
    # Papers belong to their corpus and outlive the study: imported back where the corpus
    # still holds them, they are the same rows.
    transfer_section_register(
        j.ReferencePaper,
        lambda s: j.ReferencePaper.objects.filter(
            Q(pk__in=j.ReferenceComparison.objects.filter(run__study=s).values("reference"))
            | Q(
                pk__in=j.ReferenceComparison.objects.filter(run__study=s).values("target_reference")
            )
        ),
        same_if=("corpus", "row"),
    )
    transfer_section_register(
        j.ReferenceComparison, lambda s: j.ReferenceComparison.objects.filter(run__study=s)
    )


def _leakage_call_ids(study: Any) -> set[int]:
    from studies.services.ideas import leakage_call_ids

    return leakage_call_ids(study)
