"""Direct scoring on the study's review form, and one absolute score per idea."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from llm.models import LLMCall

from ...methods import prompts, schemas
from ...methods.panel import member_means, panel_scores
from ...methods.parsing import (
    AbsoluteScore,
    FormScores,
    Unparseable,
    parse_absolute_score,
    parse_form_scores,
)
from ...models import IdeaRating, JudgeRun, Judgment, PairwiseOutcome
from ..base import (
    REPEAT,
    Driver,
    Unit,
    mark_parsed,
)

Method = JudgeRun.Method
Verdict = PairwiseOutcome.Verdict


class ScoreDriver(Driver):
    """Direct scoring on the study's form, or one absolute score (the
    scientific-ideation-eval benchmark's 1–5 mode)."""

    def __init__(self, **kw: Any):
        super().__init__(**kw)
        self.samples = int(self.params["samples"])
        self.absolute = "metric" in self.params
        if self.absolute:
            p = self.params
            self.ranges = {p["metric"]: (int(p["low"]), int(p["high"]))}
        else:
            form = self.study.form_definition()
            self.specs = [
                prompts.MetricSpec(
                    key=m.key,
                    low=m.minimum,
                    high=m.maximum,
                    label=m.label,
                    description=m.question,
                    anchors=m.anchors,
                )
                for m in form.metrics
            ]
            self.ranges = prompts.form_ranges(self.specs)
        self.repeats = [
            i.pk for i in self.repeated_among(list(self.ideas), lambda i: ("score", i.pk, 0))
        ]
        # A panel asks every member every prompt; members take turns idea by idea, so a
        # run stopped by its budget has scored its ideas by the whole panel, not by some.
        self.total = len(self.ideas) * self.samples * self.panel_size + len(self.repeats)

    def messages(self, idea_id: int) -> tuple[list[dict[str, str]], str]:
        text = self.text[idea_id]
        if self.absolute:
            p = self.params
            msgs = prompts.absolute_messages(
                text, p["criterion"], p["description"], int(p["low"]), int(p["high"])
            )
            return msgs, prompts.ABSOLUTE.id
        return prompts.direct_scoring_messages(text, self.specs), prompts.DIRECT_SCORING.id

    def answer_schema(self, unit: Unit) -> dict[str, Any] | None:
        if self.absolute:
            ((low, high),) = self.ranges.values()
            return schemas.absolute_schema(low, high)
        return schemas.form_scores_schema(self.ranges)

    def load(self) -> list[Unit]:
        rows = Judgment.objects.filter(run=self.run).values_list(
            "member", "idea_id", "sample", "score"
        )
        done: set[tuple[int, int, int]] = set()
        bad: set[tuple[int, int, int]] = set()
        for member, idea_id, sample, score in rows:
            done.add((member, idea_id, sample))
            if score is None:
                bad.add((member, idea_id, sample))
        self.done, self.unparseable = len(done), len(bad)
        units = []
        for idea in self.ideas:
            msgs, version = self.messages(idea.pk)
            for s in range(self.samples):
                for member in range(self.panel_size):
                    if (member, idea.pk, s) in done:
                        continue
                    units.append(
                        Unit(
                            ("score", idea.pk, s, member) if member else ("score", idea.pk, s),
                            msgs,
                            version,
                            salt=f"sample={s}" if s else "",
                            seed_offset=s,
                            member=member,
                        )
                    )
        # The first sample's prompt asked once more (on a resume, from the cache).
        for idea_id in self.repeats:
            msgs, version = self.messages(idea_id)
            units.append(self.repeat_unit(Unit(("score", idea_id, 0), msgs, version)))
        return units

    def parse_repeat(self, text: str) -> Any:
        if self.absolute:
            ((low, high),) = self.ranges.values()
            return parse_absolute_score(text, low, high)
        return parse_form_scores(text, self.ranges)

    def store(self, unit: Unit, call: LLMCall | None) -> bool:
        if unit.key[0] == REPEAT:
            return self.store_repeat(unit, call)
        idea_id, sample = unit.key[1], unit.key[2]
        raw = call.response_text if call else ""
        scores: dict[str, tuple[float | None, str, str]]
        parsed: AbsoluteScore | FormScores | Unparseable
        if self.absolute:
            (metric,) = self.ranges
            low, high = self.ranges[metric]
            parsed = parse_absolute_score(raw, low, high)
            if isinstance(parsed, AbsoluteScore):
                scores = {metric: (float(parsed.score), parsed.rationale, "")}
        else:
            parsed = parse_form_scores(raw, self.ranges)
            if isinstance(parsed, FormScores):
                scores = {m: (float(v.score), v.rationale, "") for m, v in parsed.scores.items()}
        if isinstance(parsed, Unparseable):
            scores = {m: (None, "", parsed.reason) for m in self.ranges}
        mark_parsed(call, parsed)
        Judgment.objects.bulk_create(
            [
                Judgment(
                    run=self.run,
                    member=unit.member,
                    idea_id=idea_id,
                    metric=m,
                    score=score,
                    rationale=rationale,
                    parse_error=err,
                    call=call,
                    sample=sample,
                )
                for m, (score, rationale, err) in scores.items()
            ]
        )
        return isinstance(parsed, Unparseable)

    def finish(self) -> dict[str, Any]:
        per: dict[tuple[int, str], list[float | None]] = defaultdict(list)
        by_member: dict[int, list[tuple[Any, int, float | None]]] = defaultdict(list)
        for member, idea_id, metric, sample, score in Judgment.objects.filter(
            run=self.run
        ).values_list("member", "idea_id", "metric", "sample", "score"):
            per[(idea_id, metric)].append(score)
            by_member[member].append(((idea_id, metric), sample, score))
        # One judge: the mean of its parseable samples. A panel: the mean of its members'
        # means (judging.methods.panel), which is the same for a panel of one.
        means = {m: member_means(rows) for m, rows in sorted(by_member.items())}
        combined = panel_scores(means)
        IdeaRating.objects.filter(run=self.run).delete()
        ratings = []
        for (idea_id, metric), values in per.items():
            history: dict[str, Any] = {
                "samples": values,
                "parsed": sum(v is not None for v in values),
            }
            if self.panel_size > 1:
                history["members"] = [
                    means.get(m, {}).get((idea_id, metric)) for m in range(self.panel_size)
                ]
            ratings.append(
                IdeaRating(
                    run=self.run,
                    idea_id=idea_id,
                    dimension=metric,
                    score=combined.get((idea_id, metric)),
                    history=[history],
                )
            )
        IdeaRating.objects.bulk_create(ratings)
        summary: dict[str, Any] = {"metrics": list(self.ranges), "samples": self.samples}
        if self.panel_size > 1:
            summary["panel_members"] = self.panel_size
        return summary
