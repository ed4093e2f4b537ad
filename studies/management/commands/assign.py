"""Solve (and unless --dry-run, commit) a study's reviewer assignment."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from studies.analysis.rounding import counted
from studies.models import Study
from studies.services.assignment import assignment_commit, assignment_preview
from studies.services.errors import ImportedStudyRefused
from studies.services.invitations import RecruitmentError


class Command(BaseCommand):
    help = "Assign ideas to approved reviewers under the study's rules (same as the web preview)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="study slug")
        parser.add_argument("--dry-run", action="store_true", help="solve and report only")
        parser.add_argument("--seed", type=int, default=None, help="random seed (default: drawn)")
        parser.add_argument(
            "--mode",
            choices=["keep", "resolve"],
            default="keep",
            help="keep: keep current assignments and fill the gaps (default); "
            "resolve: keep only submitted reviews and re-draw the rest",
        )
        parser.add_argument(
            "--extra-load",
            action="store_true",
            help="allow current reviewers up to the study's maximum load",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        study = Study.objects.filter(slug=opts["study"]).first()
        if study is None:
            raise CommandError(f"no study {opts['study']!r}")
        try:
            job, result, plan = assignment_preview(
                study=study, seed=opts["seed"], mode=opts["mode"], extra_load=opts["extra_load"]
            )
        except ImportedStudyRefused as exc:
            raise CommandError(f"{study.slug}: {exc}") from exc
        out = self.stdout
        out.write(
            f"study {study.slug}: {counted(len(plan.inputs.reviewers), 'reviewer')}, "
            f"{counted(len(plan.inputs.ideas), 'idea')}, "
            f"{counted(len(plan.inputs.fixed), 'fixed pair')}"
        )
        for note in [*plan.notes, *result.notes]:
            out.write(f"note: {note}")
        if not result.feasible:
            for p in result.problems:
                self.stderr.write(f"cannot assign: {p}")
            raise CommandError(f"no assignment satisfies the rules (seed {result.seed})")
        out.write(
            f"{result.status}: {len(result.pairs)} assignments in {result.solve_seconds:.2f} s, "
            f"seed {result.seed}"
        )
        out.write(f"reviews by topic rank: {result.objective.get('reviews_by_topic_rank')}")
        share = result.objective.get("first_choice_share")
        if share is not None:
            out.write(
                f"first-choice share ({plan.inputs.params.topic_choice}): {share:.1%} of the "
                "reviews by reviewers with two topics"
            )
        out.write(f"ideas by review count: {result.objective.get('ideas_by_review_count')}")
        for rid, load in sorted(result.reviewer_loads.items()):
            counts = result.reviewer_condition_counts.get(rid, {})
            detail = ", ".join(f"{c} {n}" for c, n in counts.items() if n)
            out.write(f"  {rid}: {load} ({detail})")
        if opts["dry_run"]:
            out.write("dry run: nothing written")
            return
        try:
            summary = assignment_commit(study=study, job=job)
        except RecruitmentError as exc:
            raise CommandError(str(exc)) from exc
        out.write(
            self.style.SUCCESS(
                f"committed: {summary['created']} new, {summary['restored']} restored, "
                f"{summary['withdrawn']} withdrawn"
                + (f" ({summary['gold']} gold items)" if summary.get("gold") else "")
            )
        )
        study.refresh_from_db()
        if not study.is_open_to_reviewers():
            out.write(
                "the study is not open for review: reviewers see nothing until it opens "
                "(its page's Open for review, or manage.py study_open)"
            )
