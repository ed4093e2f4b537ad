"""Report files go through the "reports" storage of settings.STORAGES: a build saves them
there under a fresh version, the row names the version only once all are saved, and the
pages read them back through the storage, never through a path."""

from __future__ import annotations

import dataclasses
import io
import json
import zipfile

import pytest
from django.urls import reverse

from studies.models import StudyReport
from studies.report_files import _versions_remove_unshown
from tests.factories import FAST, make_agreement_study

pytestmark = pytest.mark.slow  # seconds each: reports, worker processes, servers

IN_MEMORY = {"BACKEND": "django.core.files.storage.InMemoryStorage"}
# Four builds in one test: what is checked here is where the files go, not the statistics.
CHEAP = dataclasses.replace(
    FAST,
    consistency_splits=20,
    agreement_splits=20,
    agreement_bootstrap=20,
    agreement_permutations=20,
    ordinal="none",
)


@pytest.fixture
def memory_reports(settings, tmp_path):
    """The reports storage is kept in memory; REPORTS_ROOT points at an empty folder that
    nothing should write into."""
    settings.REPORTS_ROOT = tmp_path / "reports"
    settings.STORAGES = {**settings.STORAGES, "reports": IN_MEMORY}
    from studies.storage import reports_storage

    return reports_storage()


def _build(study, options=FAST):
    from studies.report_files import report_build

    return report_build(study=study, options=options)


def _versions(storage, slug):
    try:
        return sorted(storage.listdir(slug)[0])
    except FileNotFoundError:
        return []


def test_a_report_is_built_listed_and_served_from_the_configured_storage(
    db, client, owner, memory_reports, tmp_path
):
    from django.core.files.storage import InMemoryStorage

    assert isinstance(memory_reports, InMemoryStorage)
    seeded = make_agreement_study(owner, n_per_cell=3)
    snap = _build(seeded.study)
    assert snap.directory.startswith("agree/")
    _, stored = memory_reports.listdir(snap.directory)
    listed = snap.data["files"]["csv"]
    assert {"multiplicity.csv", "ordinal.csv"} <= set(listed)
    assert set(stored) >= {"report.json", "report.html", "package.zip", *listed}
    # nothing was written where the default storage would have put it
    assert not (tmp_path / "reports").exists() or not any((tmp_path / "reports").rglob("*"))

    client.force_login(owner)
    page = client.get(reverse("studies:study_report", args=["agree"])).content.decode()
    for name in ["multiplicity.csv", "ordinal.csv"]:
        url = reverse("studies:study_report_file", args=["agree", name])
        assert url in page, name
        served = b"".join(client.get(url).streaming_content)
        with memory_reports.open(f"{snap.directory}/{name}", "rb") as fh:
            assert served == fh.read(), name
    # the report page embeds the stored document's body
    with memory_reports.open(f"{snap.directory}/report.html", "rb") as fh:
        html = fh.read().decode()
    body = html[html.find("<body>") + len("<body>") : html.rfind("</body>")]
    assert body.strip()[:200] in page
    package = client.get(reverse("studies:study_report_file", args=["agree", "package.zip"]))
    with zipfile.ZipFile(io.BytesIO(b"".join(package.streaming_content))) as z:
        inside = json.loads(z.read("package/report/report.json"))
    assert inside["files"]["csv"] == listed


def test_a_build_killed_while_saving_leaves_the_previous_report_shown_and_the_next_cleans_up(
    db, client, owner, memory_reports, monkeypatch
):
    seeded = make_agreement_study(owner, n_per_cell=3)
    first = _build(seeded.study, CHEAP)
    with memory_reports.open(f"{first.directory}/by_review.csv", "rb") as fh:
        first_table = fh.read()

    saved: list[str] = []
    real_save = type(memory_reports).save

    def save_three_then_die(self, name, content, max_length=None):
        if len(saved) == 3:
            raise KeyboardInterrupt("worker killed")
        saved.append(name)
        return real_save(self, name, content, max_length=max_length)

    monkeypatch.setattr(type(memory_reports), "save", save_three_then_die)
    with pytest.raises(KeyboardInterrupt):
        _build(seeded.study, CHEAP)
    monkeypatch.undo()
    partial = saved[0].rsplit("/", 1)[0]
    assert partial != first.directory and len(memory_reports.listdir(partial)[1]) == 3
    assert _versions(memory_reports, "agree") == sorted(
        v.split("/")[1] for v in (first.directory, partial)
    )

    # pages still show the complete report, file for file
    assert StudyReport.objects.get(study=seeded.study).pk == first.pk
    client.force_login(owner)
    url = reverse("studies:study_report_file", args=["agree", "by_review.csv"])
    assert b"".join(client.get(url).streaming_content) == first_table
    for name in ["report.html", "report.json", "package.zip"]:
        url = reverse("studies:study_report_file", args=["agree", name])
        assert client.get(url).status_code == 200, name

    # the next build removes the partial version; the one it replaced goes the same way
    # when the build after it starts
    second = _build(seeded.study, CHEAP)
    assert _versions(memory_reports, "agree") == sorted(
        v.split("/")[1] for v in (first.directory, second.directory)
    )
    _versions_remove_unshown(memory_reports, seeded.study)
    assert _versions(memory_reports, "agree") == [second.directory.split("/")[1]]


@pytest.mark.embedded  # a data migration, on each database
@pytest.mark.django_db(transaction=True)
def test_the_migration_turns_old_report_paths_into_storage_names(owner, settings, tmp_path):
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    from studies.services.study import study_create

    settings.REPORTS_ROOT = tmp_path / "reports"
    study = study_create(owner=owner, slug="old", baseline_condition="Human")
    inside = tmp_path / "reports" / "old" / "20240101T000000000000"
    rows = {
        "inside": StudyReport.objects.create(study=study, data={}, directory=str(inside)),
        # a build written only with --out: never served, left as it was
        "outside": StudyReport.objects.create(
            study=study, data={}, directory=str(tmp_path / "elsewhere")
        ),
    }
    executor = MigrationExecutor(connection)
    executor.migrate([("studies", "0010_llm_models_moved")])
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
    names = {k: StudyReport.objects.get(pk=r.pk).directory for k, r in rows.items()}
    assert names == {"inside": "old/20240101T000000000000", "outside": str(tmp_path / "elsewhere")}
