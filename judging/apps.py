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
        # imports judging's runs or methods.
        from studies.demo_judging import demo_judging_register
        from studies.judge_ratings import register_provider
        from studies.overview import judge_run_counter_register
        from studies.package import package_section_register

        from . import tasks  # noqa: F401  (registers the judge-run task with studies.jobs)
        from .demo import DEMO_JUDGING
        from .package_section import judges_section
        from .run_counts import study_judge_run_counts
        from .services.ratings import RUN_RATINGS

        register_provider(RUN_RATINGS)
        judge_run_counter_register(study_judge_run_counts)
        package_section_register("judges", judges_section)
        demo_judging_register(DEMO_JUDGING)
        _register_transfer()


def _register_transfer() -> None:
    """Judging's part of a study file (studies.transfer defines the sections): its runs,
    their calls and outcomes, and the configs and corpora they used, by name."""
    from django.db.models import Q

    from studies.ideaprep import leakage_call_ids
    from studies.models import NormalizationResult
    from studies.transfer import transfer_section_register, transfer_shared_register

    from . import models as j

    def shared_fields(model: Any, *key: str) -> tuple[str, ...]:
        return tuple(
            f.name for f in model._meta.concrete_fields if not f.primary_key and f.name not in key
        )

    # A researcher's own key stays on this installation: a moved config arrives without it.
    transfer_shared_register(
        j.JudgeConfig, key=("name",), fields=shared_fields(j.JudgeConfig, "name", "endpoint_key")
    )
    transfer_shared_register(
        j.ReferenceCorpus, key=("name",), fields=shared_fields(j.ReferenceCorpus, "name")
    )
    transfer_section_register(j.JudgeRun, lambda s: j.JudgeRun.objects.filter(study=s))
    transfer_section_register(
        j.LLMCall,
        lambda s: j.LLMCall.objects.filter(
            Q(run__study=s)
            | Q(pk__in=NormalizationResult.objects.filter(idea__study=s).values("call"))
            | Q(pk__in=leakage_call_ids(s))
        ),
    )
    for model in (j.Judgment, j.PairwiseOutcome, j.IdeaRating, j.Formalisation):
        transfer_section_register(model, lambda s, model=model: model.objects.filter(run__study=s))
    transfer_section_register(
        j.ReferencePaper,
        lambda s: j.ReferencePaper.objects.filter(
            Q(pk__in=j.ReferenceComparison.objects.filter(run__study=s).values("reference"))
            | Q(
                pk__in=j.ReferenceComparison.objects.filter(run__study=s).values("target_reference")
            )
        ),
    )
    transfer_section_register(
        j.ReferenceComparison, lambda s: j.ReferenceComparison.objects.filter(run__study=s)
    )
