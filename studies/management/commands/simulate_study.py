"""Plan a study: simulate it many times and report the power of each test.

    python manage.py simulate_study --reviewers 79 --ideas-per-condition 49 \
        --effects AI=0.76,AI_Rerank=0.9 --reviews-per-idea 2-4 --reps 200
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from studies import csvsafe
from studies.analysis.simulate import TESTS, power, simulate_study


def _effects(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        if "=" not in part:
            raise CommandError(f"--effects {part!r}: expected CONDITION=EFFECT")
        key, value = part.split("=", 1)
        try:
            out[key.strip()] = float(value)
        except ValueError as exc:
            raise CommandError(f"--effects {part!r}: {value!r} is not a number") from exc
    return out


def _range(text: str, name: str) -> int | tuple[int, int]:
    try:
        if "-" in text:
            lo, hi = (int(x) for x in text.split("-", 1))
            return (lo, hi)
        return int(text)
    except ValueError as exc:
        raise CommandError(f"{name} {text!r}: expected N or LOW-HIGH") from exc


class Command(BaseCommand):
    help = "Simulate a study design from variance components and effects; print each test's power."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--reviewers", type=int, default=79)
        parser.add_argument("--ideas-per-condition", type=int, default=49)
        parser.add_argument("--baseline", default="Human")
        parser.add_argument(
            "--effects",
            default="AI=0.76,AI_Rerank=0.9",
            help="CONDITION=EFFECT,… (vs the baseline)",
        )
        parser.add_argument("--reviews-per-idea", default="2-4", help="N or LOW-HIGH")
        parser.add_argument("--load", default="2-7", help="reviews per reviewer, LOW-HIGH")
        parser.add_argument("--topics", type=int, default=7)
        parser.add_argument("--var-reviewer", type=float, default=0.80)
        parser.add_argument("--var-idea", type=float, default=0.41)
        parser.add_argument("--var-topic", type=float, default=0.05)
        parser.add_argument("--var-residual", type=float, default=1.9)
        parser.add_argument(
            "--discretize", action="store_true", help="round and clip scores to 1-10"
        )
        parser.add_argument("--reps", type=int, default=200)
        parser.add_argument("--alpha", type=float, default=0.05)
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument(
            "--tests", default=",".join(TESTS), help=f"comma-separated subset of {', '.join(TESTS)}"
        )
        parser.add_argument(
            "--write-csv", type=Path, help="also write one simulated study as a generic import CSV"
        )
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **o: Any) -> None:
        load = _range(o["load"], "--load")
        if not isinstance(load, tuple):
            load = (load, load)
        design: dict[str, Any] = {
            "n_reviewers": o["reviewers"],
            "n_ideas_per_condition": o["ideas_per_condition"],
            "conditions": _effects(o["effects"]),
            "baseline": o["baseline"],
            "reviews_per_idea": _range(o["reviews_per_idea"], "--reviews-per-idea"),
            "n_topics": o["topics"],
            "var_reviewer": o["var_reviewer"],
            "var_idea": o["var_idea"],
            "var_topic": o["var_topic"],
            "var_residual": o["var_residual"],
            "load": load,
            "discretize": o["discretize"],
        }
        tests = [t.strip() for t in o["tests"].split(",") if t.strip()]
        try:
            if o["write_csv"]:
                df = simulate_study(**design, seed=o["seed"])
                csvsafe.frame_to_csv(
                    df.rename(columns={"overall": "overall_score"}), o["write_csv"], index=False
                )
                self.stderr.write(
                    f"one simulated study written to {o['write_csv']} ({len(df)} rows)"
                )
            table = power(n_reps=o["reps"], alpha=o["alpha"], seed=o["seed"], tests=tests, **design)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        if o["json"]:
            self.stdout.write(
                json.dumps(
                    {"design": design, "power": table.to_dict(orient="records")},
                    indent=2,
                    default=str,
                )
            )
            return
        self.stdout.write(
            f"design: {design['n_reviewers']} reviewers, {design['n_ideas_per_condition']} ideas per condition, "
            f"reviews per idea {o['reviews_per_idea']}, variances reviewer {design['var_reviewer']}, idea "
            f"{design['var_idea']}, topic {design['var_topic']}, residual {design['var_residual']}"
        )
        self.stdout.write(
            f"power at alpha = {o['alpha']} over {o['reps']} simulated studies (± Monte Carlo SE):"
        )
        for row in table.itertuples():
            self.stdout.write(
                f"  {row.test:<12} {row.condition:<12} effect {row.effect:+.2f}: "
                f"{row.power:.3f} ± {row.mc_se:.3f}  ({row.n_valid} valid)"
            )
