"""The demo's two linked phases: si2024 (ideation) and a SYNTHETIC execution phase.

Imports tests/data/synthetic_execution_release.json (written by
scripts/synthetic_execution_release.py: real ideation ids, topics and conditions, generated
scores; no number in it is the execution study's) as the study ``si2024-execution`` with
the built-in execution form, gives it a plan for the phase comparison (one-sided "AI <
Human", Benjamini-Hochberg over the shared metrics, as the released analysis), links it
to ``si2024``, builds its report and prints the comparison's key figures. Idempotent.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from studies.models import Study, StudyReport
from studies.phase_links import PhaseLinkError, phase_link
from studies.report_files import report_build
from studies.services.study import study_plan_set

RELEASE = Path(settings.BASE_DIR) / "tests" / "data" / "synthetic_execution_release.json"
SLUG = "si2024-execution"
PLAN = {
    "hypotheses": [{"direction": "AI < Human", "test": "phases"}],
    "multiple_testing": {"method": "bh"},
    "phases": {
        "metrics": ["novelty", "excitement", "effectiveness", "overall"],
        "direction": "AI < Human",
        "leave_out": [],
    },
}


class Command(BaseCommand):
    help = (
        "Import the synthetic execution phase as si2024-execution, link it to si2024, build "
        "its report and print the phase comparison (run load_demo first)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--earlier", default="si2024", help="slug of the ideation study")
        parser.add_argument("--rebuild", action="store_true", help="build the report again")
        parser.add_argument("--no-report", action="store_true", help="import and link only")

    def handle(self, *args: Any, **opts: Any) -> None:
        earlier = Study.objects.filter(slug=opts["earlier"]).first()
        if earlier is None:
            raise CommandError(f"no study {opts['earlier']!r}: run `manage.py load_demo` first")
        study = Study.objects.filter(slug=SLUG).first()
        if study is None:
            call_command(
                "import_reviews",
                format="generic",
                reviews=RELEASE,
                study=SLUG,
                owner=earlier.owner.get_username(),
                title="Execution phase of si2024 (SYNTHETIC reviews, for the demo)",
                form="execution",
                baseline="Human",
                human_conditions="Human",
                map=["code_quality=codebase_quality"],
                stdout=self.stdout,
            )
            study = Study.objects.get(slug=SLUG)
            study_plan_set(study=study, source=PLAN, actor=None)
        if study.previous_phase_id != earlier.pk:
            try:
                phase_link(later=study, earlier=earlier, actor=None)
            except PhaseLinkError as exc:
                raise CommandError(f"not linked: {exc}") from exc
            study.refresh_from_db()
        if opts["no_report"]:
            self.stdout.write(f"{SLUG} linked to {earlier.slug}; no report built (--no-report)")
            return
        report = StudyReport.objects.filter(study=study).first()
        if report is None or opts["rebuild"] or "phases" not in report.data:
            self.stdout.write(f"building the {SLUG} report with the phase comparison …")
            report = report_build(study=study)
        self.stdout.write(phase_summary(report.data))


def phase_summary(report: dict[str, Any]) -> str:
    """The comparison's key figures as text: changes, Welch tests, the model's interaction,
    correlations of the idea means."""
    p = report.get("phases") or {}
    if not p.get("available"):
        return f"no phase comparison: {p.get('reason') or 'the study is not linked'}"
    lines = [
        f"Phase comparison {p['labels'][0]} -> {p['labels'][1]} "
        f"({p['match']['n_compared']} ideas in both; SYNTHETIC execution reviews)",
        f"  {p['notes'][0]}",
    ]
    changes = {(c["metric"], c["condition"]): c for c in p["changes"]}
    corr = {(c["metric"], c["subset"]): c for c in p["correlations"]}
    for t in p["tests"]:
        m, c, b = t["metric"], t["condition"], t["baseline"]
        fit = p["mixed"].get(m) or {}
        inter = next((r for r in fit.get("interactions", []) if r["condition"] == c), None)
        r_all = corr.get((m, "all"), {})
        lines.append(
            f"  {m:13s} change {b} {_f(changes[(m, b)]['mean_change'])}, "
            f"{c} {_f(changes[(m, c)]['mean_change'])}; Welch {c}-{b} {_f(t['diff'])} "
            f"(t {_f(t['t'])}, df {_f(t['df'], 1)}), p {t['alternative']} "
            f"{_p(t['p_unadjusted'])}, {p['multiplicity']['method']} {_p(t['p_adjusted'])}; "
            + (
                f"mixed {_f(inter['coef'])} (p adj {_p(inter['p_adjusted'])}); "
                if inter
                else "mixed not fitted; "
            )
            + f"Spearman {_f(r_all.get('spearman_rho'))}, Pearson {_f(r_all.get('pearson_r'))}"
        )
    return "\n".join(lines)


def _f(x: Any, digits: int = 2) -> str:
    return "n/a" if x is None else f"{float(x):.{digits}f}"


def _p(x: Any) -> str:
    return "n/a" if x is None else f"{float(x):.2g}"
