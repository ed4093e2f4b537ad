"""Strict grammars for what an LLM judge answers.

Every parser returns either a typed verdict or an `Unparseable(reason, raw)`. Nothing in
here guesses: an answer that is ambiguous, out of range or shaped differently from what
the prompt asked for is unparseable, and the callers count it as such instead of turning
it into a win, a loss or a score.

Tolerances, all deliberate and all small:
- `<think>…</think>` blocks are removed before parsing (reasoning models emit them). A
  stray closing `</think>` with no opening tag drops everything before it, because some
  servers put the opening tag in the chat template and return only the closing one. An
  opening `<think>` that is never closed is unparseable: the answer was cut off.
- A JSON answer may be wrapped in one Markdown code fence (```json … ``` or ``` … ```).
- Leading and trailing whitespace is ignored.

Nothing else is forgiven: no prose around JSON, no duplicate keys, no floats where an
integer is asked for, no scores given as strings.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from studies.protocol import jsonsafe

__all__ = [
    "FORMALISATION_KEYS",
    "AbsoluteScore",
    "DimensionVerdicts",
    "FormScores",
    "FormalisedParts",
    "MetricScore",
    "PairwiseVerdict",
    "Unparseable",
    "Winner",
    "parse_absolute_score",
    "parse_dimension_verdicts",
    "parse_form_scores",
    "parse_formalisation",
    "parse_initial_scores",
    "parse_pairwise",
    "parse_reasoned_verdicts",
    "strip_think",
]

Winner = Literal["A", "B", "tie"]


@dataclass(frozen=True)
class Unparseable:
    """An answer outside the grammar. `reason` is for people; `raw` is the answer as given."""

    reason: str
    raw: str

    def __bool__(self) -> bool:
        # So `if verdict:` reads as "if we got a verdict"; never a score of its own.
        return False


@dataclass(frozen=True)
class MetricScore:
    score: int
    rationale: str


@dataclass(frozen=True)
class FormScores:
    """A direct-scoring answer: one integer score and rationale per metric of the form."""

    scores: dict[str, MetricScore]


@dataclass(frozen=True)
class PairwiseVerdict:
    """Which of the two shown ideas won. "A" is whichever idea was shown first."""

    winner: Winner


@dataclass(frozen=True)
class FormalisedParts:
    """The LigBench four-part representation of an idea, as parsed from a reply (the
    stored row is the `Formalisation` model)."""

    main_target: str
    core_breakthrough: str
    innovative_methods: str
    experimental_design: str

    def as_dict(self) -> dict[str, str]:
        return {k: getattr(self, k) for k in FORMALISATION_KEYS}


@dataclass(frozen=True)
class AbsoluteScore:
    score: int
    rationale: str = ""


@dataclass(frozen=True)
class DimensionVerdicts:
    """Per-dimension pairwise verdicts (LigBench comparison against a reference paper).

    `winners[dim]` is "A", "B" or "tie" as shown to the judge.
    """

    winners: dict[str, Winner]

    def outcome_for(self, dimension: str, side: Literal["A", "B"] = "A") -> float:
        """Elo outcome S (1, 0.5 or 0) of the idea that was shown on `side`."""
        s = {"A": 1.0, "tie": 0.5, "B": 0.0}[self.winners[dimension]]
        return s if side == "A" else 1.0 - s


@dataclass(frozen=True)
class InitialScores:
    """LigBench's initial scores of an idea (0–5 per dimension), with the judge's reasons."""

    scores: dict[str, float]
    reasoning: str = ""


FORMALISATION_KEYS = (
    "main_target",
    "core_breakthrough",
    "innovative_methods",
    "experimental_design",
)

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"\A```(?:json\b)?\s*(?P<body>.*?)\s*```\Z", re.DOTALL | re.IGNORECASE)
_TAG = re.compile(r"\[\[\s*([^\[\]]*?)\s*\]\]")


def strip_think(raw: str) -> str | Unparseable:
    """Remove reasoning blocks; see the module docstring for the exact rules."""
    if not isinstance(raw, str):
        return Unparseable("the answer is not text", repr(raw))
    text = _THINK_BLOCK.sub("", raw)
    lowered = text.lower()
    if "<think>" in lowered:
        return Unparseable("a <think> block is never closed", raw)
    close = lowered.rfind("</think>")
    if close != -1:
        text = text[close + len("</think>") :]
    return text.strip()


def _unfence(text: str) -> str:
    m = _FENCE.match(text)
    return m.group("body").strip() if m else text


class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _load_json_object(raw: str) -> dict[str, Any] | Unparseable:
    text = strip_think(raw)
    if isinstance(text, Unparseable):
        return text
    if not text:
        return Unparseable("the answer is empty", raw)
    body = _unfence(text)
    try:
        value = jsonsafe.loads(body, object_pairs_hook=_no_duplicates)
    except _DuplicateKey as exc:
        return Unparseable(f"duplicate key {exc.args[0]!r} in the JSON answer", raw)
    except json.JSONDecodeError as exc:
        return Unparseable(f"not a JSON object: {exc.msg} at position {exc.pos}", raw)
    if not isinstance(value, dict):
        return Unparseable(f"expected a JSON object, got {type(value).__name__}", raw)
    return value


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_form_scores(raw: str, ranges: Mapping[str, tuple[int, int]]) -> FormScores | Unparseable:
    """Parse `{metric: {"score": int, "rationale": str}, ...}` for exactly the form's metrics.

    `ranges` maps each metric key of the review form to its inclusive (low, high) range,
    e.g. `{"novelty": (1, 10), ...}`.
    """
    obj = _load_json_object(raw)
    if isinstance(obj, Unparseable):
        return obj
    expected = set(ranges)
    missing = sorted(expected - set(obj))
    extra = sorted(set(obj) - expected)
    if missing:
        return Unparseable(f"missing metrics: {', '.join(missing)}", raw)
    if extra:
        return Unparseable(f"unknown metrics: {', '.join(extra)}", raw)
    scores: dict[str, MetricScore] = {}
    for metric, (low, high) in ranges.items():
        entry = obj[metric]
        if not isinstance(entry, dict):
            return Unparseable(f"{metric}: expected an object with score and rationale", raw)
        if set(entry) != {"score", "rationale"}:
            return Unparseable(
                f"{metric}: expected exactly the keys score and rationale, "
                f"got {', '.join(sorted(entry)) or 'none'}",
                raw,
            )
        score, rationale = entry["score"], entry["rationale"]
        if not _is_int(score):
            return Unparseable(f"{metric}: score {score!r} is not an integer", raw)
        if not low <= score <= high:
            return Unparseable(f"{metric}: score {score} is outside {low}–{high}", raw)
        if not isinstance(rationale, str):
            return Unparseable(f"{metric}: rationale is not a string", raw)
        scores[metric] = MetricScore(score=score, rationale=rationale.strip())
    return FormScores(scores=scores)


_WINNER_WORDS: dict[str, Winner] = {"A": "A", "B": "B", "TIE": "tie"}


def _winner_word(value: Any) -> Winner | None:
    if not isinstance(value, str):
        return None
    return _WINNER_WORDS.get(value.strip().upper())


def parse_pairwise(raw: str) -> PairwiseVerdict | Unparseable:
    """Parse exactly one `[[A]]`, `[[B]]` or `[[TIE]]` tag, or `{"winner": "A"|"B"|"tie"}`.

    The JSON form may carry a string "rationale" beside "winner" and nothing else. Tags
    are matched case-insensitively; any second tag, even a repeat of the first, makes the
    answer ambiguous and therefore unparseable.
    """
    text = strip_think(raw)
    if isinstance(text, Unparseable):
        return text
    if not text:
        return Unparseable("the answer is empty", raw)
    body = _unfence(text)
    if body.startswith("{"):
        obj = _load_json_object(raw)
        if isinstance(obj, Unparseable):
            return obj
        if "winner" not in obj:
            return Unparseable("JSON answer has no 'winner' key", raw)
        extra = sorted(set(obj) - {"winner", "rationale"})
        if extra:
            return Unparseable(f"unexpected keys in JSON answer: {', '.join(extra)}", raw)
        if "rationale" in obj and not isinstance(obj["rationale"], str):
            return Unparseable("rationale is not a string", raw)
        winner = _winner_word(obj["winner"])
        if winner is None:
            return Unparseable(f"winner {obj['winner']!r} is not A, B or tie", raw)
        return PairwiseVerdict(winner=winner)
    tags = _TAG.findall(text)
    if not tags:
        return Unparseable("no [[A]], [[B]] or [[TIE]] tag", raw)
    if len(tags) > 1:
        return Unparseable(f"{len(tags)} tags found, expected exactly one", raw)
    winner = _winner_word(tags[0])
    if winner is None:
        return Unparseable(f"unknown tag [[{tags[0]}]]", raw)
    return PairwiseVerdict(winner=winner)


def _normalise_key(key: str) -> str:
    return re.sub(r"[\s\-]+", "_", key.strip().lower())


def _part_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value.strip() or None
    if isinstance(value, list) and value and all(isinstance(v, str) and v.strip() for v in value):
        return "; ".join(v.strip() for v in value)
    return None


def parse_formalisation(raw: str) -> FormalisedParts | Unparseable:
    """Parse the four-part JSON object.

    Keys are compared after lower-casing and turning spaces/hyphens into underscores, so
    "Main Target" and "main_target" are the same key. Each value is a non-empty string or a
    non-empty list of non-empty strings (joined with "; ").
    """
    obj = _load_json_object(raw)
    if isinstance(obj, Unparseable):
        return obj
    normalised: dict[str, Any] = {}
    for key, value in obj.items():
        nk = _normalise_key(key)
        if nk in normalised:
            return Unparseable(f"key {key!r} given twice", raw)
        normalised[nk] = value
    missing = [k for k in FORMALISATION_KEYS if k not in normalised]
    extra = sorted(set(normalised) - set(FORMALISATION_KEYS))
    if missing:
        return Unparseable(f"missing parts: {', '.join(missing)}", raw)
    if extra:
        return Unparseable(f"unknown parts: {', '.join(extra)}", raw)
    parts: dict[str, str] = {}
    for key in FORMALISATION_KEYS:
        text = _part_text(normalised[key])
        if text is None:
            return Unparseable(f"{key} is empty or not text", raw)
        parts[key] = text
    return FormalisedParts(**parts)


_BARE_INT = re.compile(r"\A[+-]?\d+\Z")


def parse_absolute_score(raw: str, low: int = 1, high: int = 5) -> AbsoluteScore | Unparseable:
    """Parse an integer score in [low, high].

    Accepted shapes: the bare integer as the whole answer (`4`), exactly one tag (`[[4]]`),
    or a JSON object `{"score": 4}` with an optional string "rationale".
    """
    text = strip_think(raw)
    if isinstance(text, Unparseable):
        return text
    if not text:
        return Unparseable("the answer is empty", raw)
    body = _unfence(text)
    rationale = ""
    if body.startswith("{"):
        obj = _load_json_object(raw)
        if isinstance(obj, Unparseable):
            return obj
        if "score" not in obj:
            return Unparseable("JSON answer has no 'score' key", raw)
        extra = sorted(set(obj) - {"score", "rationale"})
        if extra:
            return Unparseable(f"unexpected keys in JSON answer: {', '.join(extra)}", raw)
        if "rationale" in obj:
            if not isinstance(obj["rationale"], str):
                return Unparseable("rationale is not a string", raw)
            rationale = obj["rationale"].strip()
        score = obj["score"]
        if not _is_int(score):
            return Unparseable(f"score {score!r} is not an integer", raw)
    elif _BARE_INT.match(body):
        score = int(body)
    else:
        tags = _TAG.findall(text)
        if not tags:
            return Unparseable("no score: expected an integer, a [[n]] tag or JSON", raw)
        if len(tags) > 1:
            return Unparseable(f"{len(tags)} tags found, expected exactly one", raw)
        if not _BARE_INT.match(tags[0]):
            return Unparseable(f"tag [[{tags[0]}]] is not an integer", raw)
        score = int(tags[0])
    if not low <= score <= high:
        return Unparseable(f"score {score} is outside {low}–{high}", raw)
    return AbsoluteScore(score=score, rationale=rationale)


def parse_dimension_verdicts(
    raw: str, dimensions: Sequence[str]
) -> DimensionVerdicts | Unparseable:
    """Parse `{dimension: "A"|"B"|"tie", ...}` for exactly the given dimensions.

    An optional string "rationale" key is allowed. One bad dimension makes the whole answer
    unparseable: the judge answered all dimensions in one breath, so a malformed part casts
    doubt on the rest.
    """
    obj = _load_json_object(raw)
    if isinstance(obj, Unparseable):
        return obj
    keys = set(obj) - {"rationale"}
    missing = sorted(set(dimensions) - keys)
    extra = sorted(keys - set(dimensions))
    if missing:
        return Unparseable(f"missing dimensions: {', '.join(missing)}", raw)
    if extra:
        return Unparseable(f"unknown dimensions: {', '.join(extra)}", raw)
    if "rationale" in obj and not isinstance(obj["rationale"], str):
        return Unparseable("rationale is not a string", raw)
    winners: dict[str, Winner] = {}
    for dim in dimensions:
        winner = _winner_word(obj[dim])
        if winner is None:
            return Unparseable(f"{dim}: {obj[dim]!r} is not A, B or tie", raw)
        winners[dim] = winner
    return DimensionVerdicts(winners=winners)


VERDICT_MARK = "VERDICT:"
SCORES_MARK = "SCORES:"


def _final_line(raw: str, mark: str) -> tuple[str, str] | Unparseable:
    """(reasoning, JSON after the mark) when the answer ends with exactly one `mark` line.

    Strict on purpose: the reasons come first and the decision last, on one line of its
    own, and nothing may follow it. An answer that states two decisions, or none, or keeps
    talking after it, is not a decision.
    """
    text = strip_think(raw)
    if isinstance(text, Unparseable):
        return text
    lines = text.strip().splitlines()
    marked = [i for i, line in enumerate(lines) if line.strip().startswith(mark)]
    if not marked:
        return Unparseable(f"no final line starting with {mark}", raw)
    if len(marked) > 1:
        return Unparseable(f"{len(marked)} lines start with {mark}; expected one", raw)
    if marked[0] != len(lines) - 1:
        return Unparseable(f"text follows the {mark} line", raw)
    reasoning = "\n".join(lines[: marked[0]]).strip()
    if not reasoning:
        return Unparseable(f"no reasoning before the {mark} line", raw)
    return reasoning, lines[-1].strip()[len(mark) :].strip()


def parse_reasoned_verdicts(raw: str, dimensions: Sequence[str]) -> DimensionVerdicts | Unparseable:
    """Reasons first, then one last line `VERDICT: {"dim": "A"|"B"|"tie", ...}` naming
    exactly the given dimensions (the JSON rules of `parse_dimension_verdicts`)."""
    found = _final_line(raw, VERDICT_MARK)
    if isinstance(found, Unparseable):
        return found
    parsed = parse_dimension_verdicts(found[1], dimensions)
    return Unparseable(parsed.reason, raw) if isinstance(parsed, Unparseable) else parsed


def parse_initial_scores(raw: str, keys: Sequence[str]) -> InitialScores | Unparseable:
    """Reasons first, then one last line `SCORES: {"key": number, ...}` with exactly the
    given keys, each a number from 0 to 5."""
    found = _final_line(raw, SCORES_MARK)
    if isinstance(found, Unparseable):
        return found
    obj = _load_json_object(found[1])
    if isinstance(obj, Unparseable):
        return Unparseable(obj.reason, raw)
    missing, extra = sorted(set(keys) - set(obj)), sorted(set(obj) - set(keys))
    if missing or extra:
        what = f"missing {', '.join(missing)}" if missing else f"unknown {', '.join(extra)}"
        return Unparseable(f"scores: {what}", raw)
    scores: dict[str, float] = {}
    for key in keys:
        value = obj[key]
        if isinstance(value, bool) or not isinstance(value, int | float):
            return Unparseable(f"{key}: {value!r} is not a number", raw)
        if not 0 <= value <= 5 or value != value:
            return Unparseable(f"{key}: {value} is outside 0–5", raw)
        scores[key] = float(value)
    return InitialScores(scores=scores, reasoning=found[0])
