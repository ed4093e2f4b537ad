"""Judges move to the teams of the studies that used them, and calls to their study.

A judge used by one study goes to that study. A judge used by several studies stays with
the first (lowest id) and each other study gets a copy under the same name; the other
studies' runs, normalization choice, normalization results, jobs and calls are pointed at
their copy. A judge nobody used goes to the studies its creator owns (a copy each); an
unused judge without a creator stays the administrator's (offered to every study), and an
unused one whose creator owns no study is listed nowhere (an administrator can give it a
study in the admin). "Used" means: a judge run, a study's normalization choice, a
normalization result, a normalization or leakage job's parameters, or a call that one of
the study's runs, normalization results or leakage checks made.

Each call gets the study it was made for: its run's, its normalization result's idea's,
or the leakage check's that lists it. The old cache keys had no study in them, so no new
call is ever answered from an old one: the cache starts empty for every study.
"""

from django.db import migrations

NORMALIZATION_JOB = "normalization"
LEAKAGE_JOB = "leakage"


def _leakage_call_ids(params):
    ids = set()
    result = (params or {}).get("result") or {}
    for side in result.values():
        if isinstance(side, dict) and isinstance(side.get("llm"), dict):
            ids.update(int(k) for k in side["llm"].get("call_ids", ()))
    return ids


def _call_studies(apps):
    """call id → the study it was made for."""
    LLMCall = apps.get_model("llm", "LLMCall")
    NormalizationResult = apps.get_model("studies", "NormalizationResult")
    JobRun = apps.get_model("studies", "JobRun")
    found = {}
    for job in JobRun.objects.filter(kind=LEAKAGE_JOB).order_by("pk"):
        for call_id in _leakage_call_ids(job.params):
            found.setdefault(call_id, job.study_id)
    for call_id, study_id in NormalizationResult.objects.filter(call__isnull=False).values_list(
        "call_id", "idea__study_id"
    ):
        found[call_id] = study_id
    for call_id, study_id in LLMCall.objects.filter(run__isnull=False).values_list(
        "pk", "run__study_id"
    ):
        found[call_id] = study_id
    return found


def _config_studies(apps, call_study):
    """config id → the ids of the studies that used it, in order."""
    JudgeRun = apps.get_model("judging", "JudgeRun")
    Study = apps.get_model("studies", "Study")
    NormalizationResult = apps.get_model("studies", "NormalizationResult")
    JobRun = apps.get_model("studies", "JobRun")
    LLMCall = apps.get_model("llm", "LLMCall")
    used = {}

    def add(config_id, study_id):
        if config_id and study_id:
            used.setdefault(int(config_id), set()).add(study_id)

    for config_id, study_id in JudgeRun.objects.values_list("config_id", "study_id"):
        add(config_id, study_id)
    for study_id, config_id in Study.objects.values_list("pk", "normalization_config_id"):
        add(config_id, study_id)
    for config_id, study_id in NormalizationResult.objects.values_list(
        "config_id", "idea__study_id"
    ):
        add(config_id, study_id)
    for job in JobRun.objects.filter(kind__in=[NORMALIZATION_JOB, LEAKAGE_JOB]):
        params = job.params or {}
        for name in ("config_id", "llm_config_id"):
            if isinstance(params.get(name), int):
                add(params[name], job.study_id)
    for call_id, config_id in LLMCall.objects.filter(config__isnull=False).values_list(
        "pk", "config_id"
    ):
        add(config_id, call_study.get(call_id))
    return {config_id: sorted(ids) for config_id, ids in used.items()}


def _copy_for(apps, config, study_id):
    """A copy of `config` for the study, with the study's own rows pointed at it."""
    JudgeRun = apps.get_model("judging", "JudgeRun")
    Study = apps.get_model("studies", "Study")
    NormalizationResult = apps.get_model("studies", "NormalizationResult")
    JobRun = apps.get_model("studies", "JobRun")
    LLMCall = apps.get_model("llm", "LLMCall")
    old = config.pk
    config.pk = None
    config.id = None
    config.study_id = study_id
    config.save()
    new = config.pk
    JudgeRun.objects.filter(study_id=study_id, config_id=old).update(config_id=new)
    Study.objects.filter(pk=study_id, normalization_config_id=old).update(
        normalization_config_id=new
    )
    NormalizationResult.objects.filter(idea__study_id=study_id, config_id=old).update(
        config_id=new
    )
    LLMCall.objects.filter(study_id=study_id, config_id=old).update(config_id=new)
    for job in JobRun.objects.filter(study_id=study_id, kind__in=[NORMALIZATION_JOB, LEAKAGE_JOB]):
        params = dict(job.params or {})
        changed = False
        for name in ("config_id", "llm_config_id"):
            if params.get(name) == old:
                params[name], changed = new, True
        if changed:
            JobRun.objects.filter(pk=job.pk).update(params=params)


def forwards(apps, schema_editor):
    JudgeConfig = apps.get_model("llm", "JudgeConfig")
    LLMCall = apps.get_model("llm", "LLMCall")
    StudyMember = apps.get_model("studies", "StudyMember")
    call_study = _call_studies(apps)
    for call_id, study_id in call_study.items():
        LLMCall.objects.filter(pk=call_id).update(study_id=study_id)
    used = _config_studies(apps, call_study)
    for config in JudgeConfig.objects.filter(study__isnull=True).order_by("pk"):
        studies = used.get(config.pk)
        if not studies and config.created_by_id:
            studies = sorted(
                StudyMember.objects.filter(user_id=config.created_by_id, role="owner").values_list(
                    "study_id", flat=True
                )
            )
        if not studies:
            continue
        first, *others = studies
        JudgeConfig.objects.filter(pk=config.pk).update(study_id=first)
        for study_id in others:
            _copy_for(apps, JudgeConfig.objects.get(pk=config.pk), study_id)


class Migration(migrations.Migration):
    dependencies = [
        ("llm", "0003_judges_belong_to_studies"),
        ("judging", "0006_judge_run_config_restrict"),
        ("studies", "0016_study_previous_phase"),
    ]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
