"""Command-line entry points: planning simulations and settings validation."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest
from django.core.management import CommandError, call_command

from studies.models import Study
from tests.conftest import ROOT

pytestmark = pytest.mark.embedded  # commands on the embedded defaults


@pytest.mark.django_db
def test_simulated_study_round_trips_through_the_generic_importer(tmp_path, owner):
    csv_path = tmp_path / "sim.csv"
    out = io.StringIO()
    call_command(
        "simulate_study",
        "--reps", "5", "--tests", "by_review,by_idea", "--reviewers", "20",
        "--ideas-per-condition", "12", "--effects", "AI=3", "--reviews-per-idea", "3",
        "--load", "3-4", "--discretize", "--write-csv", str(csv_path),
        stdout=out, stderr=io.StringIO(),
    )  # fmt: skip
    text = out.getvalue()
    assert "by_review" in text and "effect +3.00" in text
    # a huge effect is found in all five replications
    assert "by_review    AI           effect +3.00: 1.000" in text
    from studies.protocol.forms import FormDefinition, Scale
    from studies.services.study import study_create

    scale = Scale("overall", "Overall", "", 1, 10, {i: f"level {i}" for i in range(1, 11)})
    form = FormDefinition("sim", 1, "one metric", (scale,), scale, scale)
    study = study_create(owner=owner, slug="sim", form=form, baseline_condition="Human")
    call_command(
        "import_reviews", "--format", "generic", "--reviews", str(csv_path), "--study", "sim",
        "--human-conditions", "Human", stdout=io.StringIO(),
    )  # fmt: skip
    study = Study.objects.get(pk=study.pk)
    assert study.reviews.count() == 2 * 12 * 3
    assert study.reviewers.count() == 20


def test_simulate_study_rejects_a_malformed_effect():
    with pytest.raises(CommandError, match="expected CONDITION=EFFECT"):
        call_command("simulate_study", "--effects", "AI:0.5", "--reps", "1")


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"DJANGO_DEBUG": "maybe"}, "DJANGO_DEBUG='maybe' is not a boolean"),
        ({"CACHE_URL": "memcached://x"}, "CACHE_URL='memcached://x': use redis://"),
        ({"CELERY_BROKER_URL": "kafka://x"}, "CELERY_BROKER_URL='kafka://x': use redis://"),
        (
            {"IDEAREVIEW_CONSISTENCY_SPLITS": "many"},
            "IDEAREVIEW_CONSISTENCY_SPLITS='many' is not an integer",
        ),
    ],
)
def test_a_malformed_setting_stops_start_up_naming_the_variable(env, message):
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "CELERY_", "IDEAREVIEW_", "CACHE_", "REDIS_"))
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert message in result.stderr


def test_study_report_refuses_a_chance_ranking_count_out_of_range_before_any_work(
    si2024_study, monkeypatch
):
    built = []
    monkeypatch.setattr(
        "studies.management.commands.study_report.report_build", lambda **kw: built.append(kw)
    )
    with pytest.raises(CommandError, match=r"--chance-rankings: must be a whole number from 200"):
        call_command("study_report", "si2024", "--chance-rankings", "50")
    assert built == []


def test_study_report_passes_its_chance_ranking_count_to_the_build(si2024_study, monkeypatch):
    seen = {}

    def build(**kw):
        seen.update(kw)
        raise ValueError("stopped here: the options are what this test reads")

    monkeypatch.setattr("studies.management.commands.study_report.report_build", build)
    with pytest.raises(CommandError, match="stopped here"):
        call_command("study_report", "si2024", "--chance-rankings", "300")
    assert seen["options"].chance_rankings == 300


def test_a_sqlite_database_url_gets_the_embedded_defaults_locking(tmp_path):
    """A worker pointed at an SQLite file by DATABASE_URL (as the job tests' workers are)
    waits for a write lock, takes it when a transaction begins and writes ahead, as the
    default file does: without it a transaction that read and then wrote after another
    connection's write failed at once with "database is locked"."""
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "CELERY_", "IDEAREVIEW_", "CACHE_", "REDIS_", "DATABASE_"))
    }
    probe = (
        "from django.db import connection\n"
        "c = connection.cursor()\n"
        "print(c.execute('PRAGMA journal_mode').fetchone()[0],"
        " c.execute('PRAGMA busy_timeout').fetchone()[0],"
        " connection.settings_dict['OPTIONS'].get('transaction_mode'))\n"
    )
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", probe],
        cwd=ROOT,
        env={
            **clean,
            "DATABASE_URL": f"sqlite:///{tmp_path / 'named.sqlite3'}",
            "IDEAREVIEW_SQLITE_BUSY_SECONDS": "45",
            "IDEAREVIEW_VAR_DIR": str(tmp_path / "var"),
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1].split() == ["wal", "45000", "IMMEDIATE"]
