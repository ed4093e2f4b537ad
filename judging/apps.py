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
    """Judging's part of a study file (studies.services.transfer defines the sections): its runs,
    their calls and outcomes, and the configs and corpora they used, by natural key."""
    from django.db.models import Q

    from studies.models import NormalizationResult
    from studies.services.ideas import leakage_call_ids
    from studies.services.transfer import transfer_section_register, transfer_shared_register

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
            | Q(pk__in=leakage_call_ids(s))
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
