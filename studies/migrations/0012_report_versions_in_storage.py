"""Report files moved behind the "reports" storage: a report's row names its version
folder relative to that storage (<study slug>/<version>) instead of an absolute path.
Rows whose folder lies under REPORTS_ROOT (the default storage's folder) are rewritten;
a row outside it (a build written with --out only) was never served and stays as it is."""

from pathlib import Path

from django.conf import settings
from django.db import migrations, models


def to_storage_names(apps, schema_editor):
    StudyReport = apps.get_model("studies", "StudyReport")
    root = Path(settings.REPORTS_ROOT).resolve()
    for pk, directory in StudyReport.objects.values_list("pk", "directory"):
        path = Path(directory)
        if not path.is_absolute():
            continue
        try:
            name = path.resolve().relative_to(root).as_posix()
        except ValueError:
            continue
        StudyReport.objects.filter(pk=pk).update(directory=name)


def to_paths(apps, schema_editor):
    StudyReport = apps.get_model("studies", "StudyReport")
    root = Path(settings.REPORTS_ROOT).resolve()
    for pk, directory in StudyReport.objects.values_list("pk", "directory"):
        if not Path(directory).is_absolute():
            StudyReport.objects.filter(pk=pk).update(directory=str(root / directory))


class Migration(migrations.Migration):
    dependencies = [
        ("studies", "0011_jobrun_worker_received_at"),
    ]

    operations = [
        migrations.AlterField(
            model_name="studyreport",
            name="directory",
            field=models.CharField(
                help_text="The report's version folder in the reports storage: <study slug>/<version>.",
                max_length=500,
            ),
        ),
        migrations.RunPython(to_storage_names, to_paths),
    ]
