"""Size the next study from a study's reviews (the command-line sizing page)."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from studies.analysis.plan import TESTS
from studies.design_sizing import (
    SizingRequest,
    sizing_check,
    sizing_compute,
    sizing_defaults,
)
from studies.models import Study


class Command(BaseCommand):
    help = (
        "How many ideas, reviews per idea and reviewers the next study needs for the wanted "
        "power on one comparison, from this study's reviews as a pilot (docs/power.md). "
        "Defaults come from the plan's primary test."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study", help="slug of the study whose reviews are the pilot")
        parser.add_argument("--metric", help="the metric (default: the plan's primary test)")
        parser.add_argument("--test", choices=TESTS, help="the test (default: by_idea)")
        parser.add_argument("--condition", help="the condition compared with the baseline")
        parser.add_argument(
            "--effect",
            type=float,
            help="smallest difference worth detecting, in points (default: the pilot's "
            "estimate, which is noisy)",
        )
        parser.add_argument("--power", type=float, help="power wanted (default 0.8)")
        parser.add_argument(
            "--reviews-per-idea", default="2,3,4", help="counts to consider, e.g. 2,3,4"
        )
        parser.add_argument("--load", type=int, help="reviews per reviewer (default: median)")
        parser.add_argument("--bootstrap", type=int, default=200, help="simulated pilots")
        parser.add_argument("--reps", type=int, default=400, help="simulations per power")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--json", action="store_true", help="print the whole result as JSON")

    def handle(self, *args: Any, **opts: Any) -> None:
        study = Study.objects.filter(slug=opts["study"]).first()
        if study is None:
            raise CommandError(f"no study {opts['study']!r}")
        d = sizing_defaults(study)
        try:
            counts = tuple(int(k) for k in opts["reviews_per_idea"].split(",") if k.strip())
        except ValueError:
            raise CommandError("--reviews-per-idea: whole numbers separated by commas") from None
        req = SizingRequest(
            metric=opts["metric"] or d["metric"],
            test=opts["test"] or d["test"],
            condition=opts["condition"] or d["condition"],
            effect=opts["effect"] if opts["effect"] is not None else d["effect"],
            power=opts["power"] if opts["power"] is not None else d["power"],
            reviews_per_idea=counts,
            load=opts["load"],
            n_boot=opts["bootstrap"],
            n_reps=opts["reps"],
            seed=opts["seed"],
        )
        problems = sizing_check(study, req)
        if problems:
            raise CommandError("cannot size: " + "; ".join(problems))

        def progress(fraction: float, message: str) -> None:
            if opts["verbosity"] > 1:
                self.stderr.write(f"[{fraction:4.0%}] {message}")

        doc = sizing_compute(study, req, progress)
        if opts["json"]:
            self.stdout.write(json.dumps(doc, indent=2))
            return
        h, design = doc["hypothesis"], doc["design"]
        lv = doc["plan_level"]
        self.stdout.write(
            f"{h['metric']}, {h['test_label']}, {h['condition']} vs {h['baseline']} "
            f"({doc['alternative']}) at level {lv['level']:.4g}, power {doc['target_power']}, "
            f"difference {doc['effect']:.3g}{'' if doc['effect_given'] else ' (estimated)'}"
        )
        if design is None:
            self.stdout.write("no design within the cap reaches the power")
            return
        low, high = doc["interval_reviews"]
        self.stdout.write(
            f"design: {design['n_reviews']} reviews = {design['ideas_per_condition']} ideas per "
            f"condition x {design['reviews_per_idea']} reviews, {design['n_reviewers']} reviewers "
            f"at {_loads(design)} reviews each; power {doc['power']:.3f}"
        )
        fmt = lambda x: "beyond the cap" if x is None else f"{x:.0f}"  # noqa: E731
        self.stdout.write(
            f"{doc['level']:.0%} interval over {doc['bootstrap']['n']} simulated pilots: "
            f"{fmt(low)} to {fmt(high)} reviews"
        )


def _loads(design: dict) -> str:
    """What each reviewer writes: "5–6" when the reviews do not split evenly."""
    low, high = design.get("load_min", design["load"]), design["load"]
    return f"{low}–{high}" if low != high else f"{high}"
