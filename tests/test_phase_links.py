"""Linked study phases end to end: the link page's rules and permissions, the command, and
the later study's report with the phase comparison (JSON, HTML, CSVs, package).

The two phases are the si2024 ideation release and the synthetic execution release
(tests/data, docs/phases.md), imported as a user would. The report's figures are
recomputed here from the database rows with pandas, scipy and statsmodels.
"""

from __future__ import annotations

import csv
import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from scipy import stats
from statsmodels.stats.multitest import multipletests

from studies.models import AuditEvent, IdeaCondition, ReviewScore, Study, StudyMember
from studies.phase_links import phase_link_check
from studies.report_files import report_build
from studies.services.study import study_plan_set
from studies.storage import report_file_open
from tests.factories import FAST

pytestmark = pytest.mark.slow  # reports of linked studies

ROOT = Path(__file__).resolve().parents[1]
RELEASE = ROOT / "tests" / "data" / "synthetic_execution_release.json"
SHARED = ["novelty", "effectiveness", "excitement", "overall"]  # the ideation form's order


def _import_execution(owner, slug: str = "exec") -> Study:
    call_command(
        "import_reviews",
        format="generic",
        reviews=RELEASE,
        study=slug,
        owner=owner.get_username(),
        form="execution",
        baseline="Human",
        human_conditions="Human",
        map=["code_quality=codebase_quality"],
        stdout=io.StringIO(),
    )
    return Study.objects.get(slug=slug)


@pytest.fixture
def phases(si2024_study, owner):
    return si2024_study, _import_execution(owner)


def _page(client, study: Study, **query) -> str:
    url = reverse("studies:study_phases", args=[study.slug])
    response = client.get(url, query)
    assert response.status_code == 200
    return response.content.decode()


def _swap_condition(study: Study, external_id: str) -> None:
    """Move one idea of `study` to the other condition (a data error to detect)."""
    member = IdeaCondition.objects.get(study=study, external_id=external_id)
    other = study.conditions.exclude(pk=member.condition_id).get()
    member.condition = other
    member.save()


# ------------------------------------------------------------------ the link page


def test_the_link_page_lists_the_match_and_links_and_unlinks(client, owner, phases):
    ideation, execution = phases
    client.force_login(owner)
    page = _page(client, execution, previous="si2024")
    assert 'id="phase-compared">Ideas in both phases: 43<' in page
    # 147 per-condition ids in the ideation release, 43 of them executed.
    assert "Only in si2024: 104" in page and "Only in exec: 0" in page
    assert 'id="phase-only-count">Ideas in one phase only (104)<' in page
    assert 'id="phase-problems"' not in page
    metrics = page.split('id="phase-metrics"', 1)[1].split("</table>", 1)[0]
    for m in SHARED:
        assert f"<td>{m}</td><td>1–10 in both</td>" in metrics
    for m in ("feasibility",):
        assert "only in si2024</td>" in metrics.split(m, 1)[1][:80]
    for m in ("soundness", "faithfulness", "code_quality"):
        assert "only in exec</td>" in metrics.split(f">{m}<", 1)[1][:80]

    response = client.post(
        reverse("studies:study_phase_link", args=[execution.slug]), {"previous": "si2024"}
    )
    assert response.status_code == 302
    execution.refresh_from_db()
    assert execution.previous_phase == ideation
    event = AuditEvent.objects.get(study=execution, verb="phase_linked")
    assert event.actor == owner and event.detail["compared"] == 43
    assert event.detail["shared_metrics"] == SHARED
    page = _page(client, execution)
    assert 'id="phase-linked"' in page and "si2024" in page and 'id="phase-unlink"' in page
    detail = client.get(reverse("studies:study_detail", args=[execution.slug])).content.decode()
    assert 'id="glance-phase"' in detail

    client.post(reverse("studies:study_phase_unlink", args=[execution.slug]))
    execution.refresh_from_db()
    assert execution.previous_phase is None
    assert AuditEvent.objects.filter(study=execution, verb="phase_unlinked").count() == 1
    assert 'id="phase-unlinked"' in _page(client, execution)


def test_the_link_is_refused_while_conditions_disagree(client, owner, phases):
    ideation, execution = phases
    _swap_condition(execution, "Coding_2_AI")
    _swap_condition(execution, "Bias_2_Human")
    client.force_login(owner)
    page = _page(client, execution, previous="si2024")
    assert 'id="phase-problems"' in page and 'id="phase-link-submit"' not in page
    table = page.split('id="phase-disagree"', 1)[1].split("</table>", 1)[0]
    assert "<td>Coding_2_AI</td><td>AI</td><td>Human</td>" in table
    assert "<td>Bias_2_Human</td><td>Human</td><td>AI</td>" in table
    assert 'id="phase-compared">Ideas in both phases: 41<' in page
    # Posting anyway links nothing, and the page says why.
    response = client.post(
        reverse("studies:study_phase_link", args=[execution.slug]),
        {"previous": "si2024"},
        follow=True,
    )
    execution.refresh_from_db()
    assert execution.previous_phase is None
    assert "Not linked: 2 ideas have a different condition" in response.content.decode()
    assert not AuditEvent.objects.filter(verb="phase_linked").exists()
    # Once corrected, the link is made.
    _swap_condition(execution, "Coding_2_AI")
    _swap_condition(execution, "Bias_2_Human")
    client.post(reverse("studies:study_phase_link", args=[execution.slug]), {"previous": "si2024"})
    execution.refresh_from_db()
    assert execution.previous_phase == ideation


def test_a_loop_or_a_study_sharing_no_idea_is_refused(client, owner, phases):
    from studies.services.study import study_create

    ideation, execution = phases
    study_create(owner=owner, slug="empty", title="No ideas yet")
    client.force_login(owner)
    page = _page(client, execution, previous="empty")
    assert "no idea id of exec is an idea id of empty" in page
    assert 'id="phase-link-submit"' not in page
    execution.previous_phase = ideation
    execution.save()
    # The earlier study's page names its later phase, and offers no loop.
    page = _page(client, ideation)
    assert 'id="phase-later"' in page and "/studies/exec/phases/" in page
    assert 'value="exec"' not in page
    back = phase_link_check(later=ideation, earlier=execution)
    assert not back.allowed and any("loop" in p for p in back.problems)
    own = phase_link_check(later=execution, earlier=execution)
    assert own.problems == ("a study cannot be its own earlier phase",)


def test_only_editors_of_both_studies_see_or_make_the_link(client, owner, other_researcher, phases):
    ideation, execution = phases
    page_url = reverse("studies:study_phases", args=[execution.slug])
    link_url = reverse("studies:study_phase_link", args=[execution.slug])
    # Not on the team: 404 for the page and the action, and nothing changes.
    client.force_login(other_researcher)
    assert client.get(page_url).status_code == 404
    assert client.post(link_url, {"previous": "si2024"}).status_code == 404
    # A viewer of the later study: 403 (they know it exists), no nav link.
    StudyMember.objects.create(study=execution, user=other_researcher, role="viewer")
    assert client.get(page_url).status_code == 403
    assert client.post(link_url, {"previous": "si2024"}).status_code == 403
    detail = client.get(reverse("studies:study_detail", args=[execution.slug])).content.decode()
    assert page_url not in detail
    # An editor of the later study who is not on the earlier study's team: that study is
    # not offered, asking for it is a 404, and the page names nothing of it.
    StudyMember.objects.filter(study=execution, user=other_researcher).update(role="editor")
    page = client.get(page_url).content.decode()
    assert "si2024" not in page and 'id="phase-no-candidates"' in page
    assert client.get(page_url, {"previous": "si2024"}).status_code == 404
    # Posting its slug says the same as for a study that does not exist.
    answers = [
        client.post(link_url, {"previous": name}, follow=True).content.decode()
        for name in ("si2024", "no-such-study")
    ]
    assert "no study &#x27;si2024&#x27; among those you may link" in answers[0]
    assert "no study &#x27;no-such-study&#x27; among those you may link" in answers[1]
    # A viewer of the earlier study is not enough either.
    StudyMember.objects.create(study=ideation, user=other_researcher, role="viewer")
    answer = client.post(link_url, {"previous": "si2024"}, follow=True).content.decode()
    assert "among those you may link" in answer
    execution.refresh_from_db()
    assert execution.previous_phase is None
    # Editor of both: offered and linked.
    StudyMember.objects.filter(study=ideation, user=other_researcher).update(role="editor")
    assert 'value="si2024"' in client.get(page_url).content.decode()
    assert client.post(link_url, {"previous": "si2024"}).status_code == 302
    execution.refresh_from_db()
    assert execution.previous_phase == ideation


def test_a_reviewer_of_the_later_study_reaches_neither_page(client, owner, phases):
    from tests.factories import review_study

    _, execution = phases
    seeded = review_study(owner, slug="rev")
    client.force_login(seeded.users[0])
    for name in ("study_phases", "study_report"):
        assert client.get(reverse(f"studies:{name}", args=[execution.slug])).status_code == 404
    response = client.post(
        reverse("studies:study_phase_link", args=[execution.slug]), {"previous": "si2024"}
    )
    assert response.status_code == 404
    execution.refresh_from_db()
    assert execution.previous_phase is None


# ------------------------------------------------------------------ the command


def test_the_command_checks_links_refuses_and_unlinks(owner, phases):
    ideation, execution = phases
    out = io.StringIO()
    call_command("study_link_phase", "exec", "--previous", "si2024", "--check", stdout=out)
    text = out.getvalue()
    assert "ideas in both phases: 43" in text and "only in si2024: 104" in text
    assert "shared metrics: novelty 1-10, effectiveness 1-10, excitement 1-10, overall 1-10" in text
    assert "only in exec's form: soundness, faithfulness, code_quality" in text
    execution.refresh_from_db()
    assert execution.previous_phase is None

    _swap_condition(execution, "Coding_2_AI")
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(CommandError, match="not linked: 1 idea"):
        call_command("study_link_phase", "exec", "--previous", "si2024", stdout=out, stderr=err)
    assert "condition differs: Coding_2_AI: AI in si2024, Human in exec" in out.getvalue()
    _swap_condition(execution, "Coding_2_AI")

    call_command("study_link_phase", "exec", "--previous", "si2024", stdout=io.StringIO())
    execution.refresh_from_db()
    assert execution.previous_phase == ideation
    assert AuditEvent.objects.get(verb="phase_linked").actor is None
    with pytest.raises(CommandError, match="no study 'nope'"):
        call_command("study_link_phase", "exec", "--previous", "nope")
    out = io.StringIO()
    call_command("study_link_phase", "exec", "--unlink", stdout=out)
    assert "unlinked exec from si2024" in out.getvalue()
    execution.refresh_from_db()
    assert execution.previous_phase is None


# ------------------------------------------------------------------ the report


def _idea_means(study: Study, metric: str) -> pd.Series:
    """Mean score per external id, straight from the rows (an idea in two conditions
    counts its reviews under each of its ids)."""
    members = pd.DataFrame(
        list(IdeaCondition.objects.filter(study=study).values("idea_id", "external_id"))
    )
    scores = pd.DataFrame(
        list(
            ReviewScore.objects.filter(
                review__study=study, review__status="submitted", metric=metric
            ).values("review__idea_id", "score")
        )
    ).rename(columns={"review__idea_id": "idea_id"})
    return scores.merge(members, on="idea_id").groupby("external_id")["score"].mean()


def _conditions(study: Study) -> pd.Series:
    rows = IdeaCondition.objects.filter(study=study).values_list("external_id", "condition__key")
    return pd.Series(dict(rows))


@pytest.fixture
def linked_report(phases, owner, tmp_path, settings):
    settings.REPORTS_ROOT = tmp_path
    settings.IDEAREVIEW_CHROMIUM = str(tmp_path / "no-chromium")  # no PDF: not tested here
    ideation, execution = phases
    study_plan_set(
        study=execution,
        source={
            "multiple_testing": {"method": "bh"},
            "phases": {
                "direction": "AI < Human",
                "leave_out": ["Coding_2_AI", "Bias_2_Human", "Not_An_Id"],
            },
        },
        actor=owner,
    )
    call_command("study_link_phase", "exec", "--previous", "si2024", stdout=io.StringIO())
    execution.refresh_from_db()
    snap = report_build(study=execution, options=FAST)
    return ideation, execution, snap


def test_the_later_report_has_the_phase_comparison_the_plan_asks_for(client, owner, linked_report):
    ideation, execution, snap = linked_report
    client.force_login(owner)
    plan_page = client.get(reverse("studies:study_plan", args=[execution.slug])).content.decode()
    summary = plan_page.split('id="plan-phases">', 1)[1].split("</li>", 1)[0]
    assert "direction AI &lt; Human" in summary
    assert "left out: Coding_2_AI, Bias_2_Human, Not_An_Id" in summary
    p = json.loads(report_file_open(snap.directory, "report.json").read())["phases"]
    assert p["available"] and p["earlier"]["slug"] == "si2024" and p["labels"] == ["si2024", "exec"]
    assert p["metrics"] == SHARED and p["conditions"] == ["Human", "AI"]
    assert p["match"]["n_compared"] == 41
    assert p["match"]["left_out"] == ["Coding_2_AI", "Bias_2_Human"]
    assert p["match"]["left_out_absent"] == ["Not_An_Id"]
    assert p["leave_out_planned"] == ["Coding_2_AI", "Bias_2_Human", "Not_An_Id"]
    assert p["multiplicity"]["method"] == "bh"

    # The Welch tests of the change, recomputed from the rows, one-sided as planned and
    # corrected by Benjamini-Hochberg over the metrics.
    cond = _conditions(execution)
    raw = []
    for m in SHARED:
        first, second = _idea_means(ideation, m), _idea_means(execution, m)
        ids = sorted(set(second.index) - {"Coding_2_AI", "Bias_2_Human"})
        change = second[ids] - first[ids]
        ai, human = change[cond[ids] == "AI"], change[cond[ids] == "Human"]
        ref = stats.ttest_ind(ai, human, equal_var=False, alternative="less")
        row = next(t for t in p["tests"] if t["metric"] == m)
        assert row["alternative"] == "less"
        assert row["diff"] == pytest.approx(ai.mean() - human.mean(), abs=1e-10)
        assert row["t"] == pytest.approx(ref.statistic, abs=1e-10)
        assert row["p_unadjusted"] == pytest.approx(ref.pvalue, abs=1e-10)
        ch = next(c for c in p["changes"] if c["metric"] == m and c["condition"] == "AI")
        assert ch["mean_change"] == pytest.approx(ai.mean(), abs=1e-10)
        corr = next(c for c in p["correlations"] if c["metric"] == m and c["subset"] == "all")
        assert corr["spearman_rho"] == pytest.approx(
            stats.spearmanr(first[ids], second[ids]).statistic, abs=1e-10
        )
        raw.append(ref.pvalue)
    adjusted = multipletests(raw, method="fdr_bh")[1]
    got = [next(t for t in p["tests"] if t["metric"] == m)["p_adjusted"] for m in SHARED]
    np.testing.assert_allclose(got, adjusted, atol=1e-10, rtol=0)
    # The released files have no reviewer ids: the model says so.
    fit = p["mixed"]["overall"]
    assert "(1|idea)" in fit["formula"] and "(1|reviewer)" not in fit["formula"]
    assert "no reviewer random effect" in fit["fit"]["warnings"][0]


@pytest.mark.figures  # the slope plot
def test_the_later_report_html_and_csvs_show_the_comparison(linked_report):
    _, _, snap = linked_report
    html = report_file_open(snap.directory, "report.html").read().decode()
    section = html.split('<h2 id="phases">', 1)[1].split('<h2 id="mixed">', 1)[0]
    assert "Phase comparison: si2024 → exec" in section
    assert "<svg" in section  # the slope plot
    for table in ("phases-changes", "phases-tests", "phases-mixed", "phases-correlations"):
        assert f'id="{table}"' in section
    assert "Left out by the analysis plan: Coding_2_AI, Bias_2_Human, Not_An_Id" in section
    assert "not in both phases, so nothing to leave out: Not_An_Id" in section
    tests_table = section.split('id="phases-tests"', 1)[1].split("</table>", 1)[0]
    assert tests_table.count('<td class="l">less</td>') == 4
    csvs = snap.data["files"]["csv"]
    for name in ("phase_match", "phase_ideas", "phase_changes", "phase_tests", "phase_mixed"):
        assert f"{name}.csv" in csvs
    rows = list(
        csv.DictReader(
            io.StringIO(report_file_open(snap.directory, "phase_tests.csv").read().decode())
        )
    )
    assert {r["metric"] for r in rows} == set(SHARED)
    report_tests = {t["metric"]: t for t in snap.data["phases"]["tests"]}
    for r in rows:
        assert float(r["p_adjusted"]) == pytest.approx(report_tests[r["metric"]]["p_adjusted"])
    match = list(
        csv.DictReader(
            io.StringIO(report_file_open(snap.directory, "phase_match.csv").read().decode())
        )
    )
    status = {r["idea"]: r["status"] for r in match}
    assert status["Coding_2_AI"] == "left_out" and status["Not_An_Id"] == "left_out_not_found"
    assert sum(s == "only_first" for s in status.values()) == 104


def test_the_package_pseudonymises_the_ideas_of_both_phases(linked_report):
    ideation, execution, snap = linked_report
    with zipfile.ZipFile(report_file_open(snap.directory, "package.zip")) as z:
        files = {
            n.removeprefix("package/"): z.read(n).decode(errors="replace") for n in z.namelist()
        }
    ids = set(
        IdeaCondition.objects.filter(study__in=[ideation, execution]).values_list(
            "external_id", flat=True
        )
    )
    # (data/reviews.csv keeps the rationales as written, and the synthetic ones name
    # their idea: only the files the comparison writes are checked.)
    shown = {n: t for n, t in files.items() if n.startswith(("report/", "plan/"))}
    assert "report/phase_ideas.csv" in shown
    for name, text in shown.items():
        leaked = sorted(i for i in ids if i in text)
        assert not leaked, f"{name} shows {leaked[:5]}"
    p = json.loads(files["report/report.json"])["phases"]
    assert len(p["match"]["compared"]) == 41 and all(
        i.startswith("C") for i in p["match"]["compared"]
    )
    assert all(i.startswith("E") for i in p["match"]["only_first"])
    assert set(p["match"]["conditions"].values()) == {"Human", "AI"}
    # The plan's leave-out list names the same pseudonyms as the comparison.
    plan = json.loads(files["plan/current.json"])
    assert plan["phases"]["leave_out"][:2] == p["match"]["left_out"]
    assert plan["phases"]["leave_out"][2] == "Not_An_Id"  # in no phase: nothing to hide


def test_an_unlinkable_comparison_says_why_and_the_report_still_builds(
    phases, owner, tmp_path, settings
):
    settings.REPORTS_ROOT = tmp_path
    settings.IDEAREVIEW_CHROMIUM = str(tmp_path / "no-chromium")
    ideation, execution = phases
    execution.previous_phase = ideation
    execution.save()
    # The conditions changed after the link was made.
    _swap_condition(execution, "Coding_2_AI")
    snap = report_build(study=execution, options=FAST)
    p = snap.data["phases"]
    assert p["available"] is False and "different conditions" in p["reason"]
    html = report_file_open(snap.directory, "report.html").read().decode()
    assert 'id="phases-unavailable"' in html and "Coding_2_AI" in html
    assert "phase_tests.csv" not in snap.data["files"]["csv"]


def test_a_study_with_no_earlier_phase_has_no_phases_section(phases, tmp_path, settings):
    settings.REPORTS_ROOT = tmp_path
    settings.IDEAREVIEW_CHROMIUM = str(tmp_path / "no-chromium")
    _, execution = phases
    snap = report_build(study=execution, options=FAST)
    assert "phases" not in snap.data
    assert 'id="phases"' not in report_file_open(snap.directory, "report.html").read().decode()


def test_a_study_file_does_not_carry_the_link(phases):
    """The earlier study is a row of this deployment, not of the file."""
    from studies.services.transfer import study_export_data

    ideation, execution = phases
    execution.previous_phase = ideation
    execution.save()
    data = study_export_data(study=execution)
    (row,) = data["sections"]["studies.study"]
    assert row["fields"]["previous_phase"] is None
    execution.refresh_from_db()
    assert execution.previous_phase == ideation  # exporting changed nothing
