"""Import a LigBench reference corpus (PAIR-IQ-style JSON) for LigBench runs and validation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from judging.corpus import CorpusImportError, reference_corpus_embed, reference_corpus_import


class Command(BaseCommand):
    help = (
        "Import reference papers (title, abstract, venue, year, decision, rating / "
        "contribution / soundness on 0–5, the four formal parts, optional embedding) from a "
        "PAIR-IQ-style JSON or JSON Lines file. Every row is checked first; one bad row "
        "imports nothing. Scores are debiased per venue and year by a mean shift."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("path", help="the JSON or JSON Lines file")
        parser.add_argument("--name", required=True, help="a unique name for the corpus")
        parser.add_argument("--description", default="")
        parser.add_argument(
            "--embed",
            action="store_true",
            help="compute the MiniLM vectors now (otherwise the first run that needs them does)",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        path = Path(opts["path"])
        if not path.is_file():
            raise CommandError(f"{path}: no such file")
        try:
            corpus = reference_corpus_import(
                data=path.read_bytes(),
                name=opts["name"],
                filename=path.name,
                description=opts["description"],
            )
        except CorpusImportError as exc:
            raise CommandError("\n".join(exc.errors)) from exc
        n = corpus.papers.count()
        venues = ", ".join(
            f"{v}: {m:.3f}"
            for v, m in corpus.debias.get("rating", {}).get("venue_means", {}).items()
        )
        self.stdout.write(f"corpus {corpus.name!r} (id {corpus.pk}): {n} papers imported")
        if venues:
            self.stdout.write(f"rating means by venue, shifted to the overall mean: {venues}")
        if opts["embed"]:
            done = reference_corpus_embed(corpus=corpus)
            self.stdout.write(f"{done} MiniLM vectors computed")
