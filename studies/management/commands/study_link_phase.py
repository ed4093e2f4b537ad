"""Link a study to its earlier phase (or unlink it), after checking the match."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from studies.models import Study
from studies.phase_links import PhaseLinkError, phase_link, phase_link_check, phase_unlink


class Command(BaseCommand):
    help = (
        "Make EARLIER the previous phase of LATER (ideas matched by external id; refused "
        "while conditions disagree); --check only prints the match; --unlink removes the link."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("later", help="slug of the later study (its report compares)")
        parser.add_argument("--previous", metavar="EARLIER", help="slug of the earlier study")
        parser.add_argument("--check", action="store_true", help="print the match, link nothing")
        parser.add_argument("--unlink", action="store_true", help="remove the link")

    def handle(self, *args: Any, **opts: Any) -> None:
        later = _study(opts["later"])
        if opts["unlink"]:
            if opts["previous"]:
                raise CommandError("--unlink takes no --previous")
            earlier = phase_unlink(later=later, actor=None)
            self.stdout.write(
                f"unlinked {later.slug} from {earlier.slug}"
                if earlier
                else f"{later.slug} was not linked to an earlier phase"
            )
            return
        if not opts["previous"]:
            raise CommandError("name the earlier study: --previous EARLIER (or --unlink)")
        earlier = _study(opts["previous"])
        check = phase_link_check(later=later, earlier=earlier)
        self._print(check)
        if opts["check"]:
            return
        try:
            phase_link(later=later, earlier=earlier, actor=None)
        except PhaseLinkError as exc:
            raise CommandError(f"not linked: {exc}") from exc
        self.stdout.write(f"linked: {later.slug} is the later phase of {earlier.slug}")

    def _print(self, check: Any) -> None:
        e, lt = check.earlier.slug, check.later.slug
        self.stdout.write(f"ideas in both phases: {len(check.compared)}")
        self.stdout.write(f"only in {e}: {len(check.only_earlier)}")
        self.stdout.write(f"only in {lt}: {len(check.only_later)} {' '.join(check.only_later)}")
        for i, a, b in check.disagree:
            self.stdout.write(f"condition differs: {i}: {a} in {e}, {b} in {lt}")
        if check.shared is not None:
            sh = check.shared
            shared = ", ".join(f"{m} {lo}-{hi}" for m, (lo, hi) in sh.scales.items())
            self.stdout.write(f"shared metrics: {shared or 'none'}")
            for m, (a, b) in sh.mismatched.items():
                self.stdout.write(f"different scales, not compared: {m} {a} vs {b}")
            self.stdout.write(f"only in {e}'s form: {', '.join(sh.only_first) or 'none'}")
            self.stdout.write(f"only in {lt}'s form: {', '.join(sh.only_second) or 'none'}")
        for p in check.problems:
            self.stderr.write(f"refused: {p}")


def _study(slug: str) -> Study:
    study = Study.objects.filter(slug=slug).first()
    if study is None:
        raise CommandError(f"no study {slug!r}")
    return study
