"""Parsing review files into clean records, before anything touches the database.

Pure Python (no Django): a parser reads a file, normalises what can be normalised while
keeping every raw value, flags rows with consent or pledge problems, and either returns a
complete `ParsedImport` or raises `ImportFailed` listing every problem with its file, row
and field. The service layer then writes a `ParsedImport` in one transaction, so a bad
file leaves the database exactly as it was.

Formats:
- ``si2024``: the released reviews of Si et al. (one JSON object of parallel columns)
  plus the id → title CSV.
- ``generic``: CSV, JSON (a list of row objects or an object of parallel columns) or JSONL,
  with a column mapping; see docs/import-format.md.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import csvsafe
from .analysis.rounding import counted
from .protocol import jsonsafe
from .protocol.forms import IMPORT_FIELDS, FormDefinition, Scale

MAX_REPORTED_ERRORS = 50


@dataclass(frozen=True)
class RowProblem:
    file: str
    row: int | None  # 1-based data row; None for file-level problems
    field: str | None
    message: str

    def __str__(self) -> str:
        where = self.file
        if self.row is not None:
            where += f", row {self.row}"
        if self.field:
            where += f", field {self.field!r}"
        return f"{where}: {self.message}"


class ImportFailed(Exception):
    """A file that cannot be imported; nothing has been written."""

    def __init__(self, problems: Sequence[RowProblem]):
        self.problems = list(problems)
        shown = "\n".join(f"  - {p}" for p in self.problems[:MAX_REPORTED_ERRORS])
        more = len(self.problems) - MAX_REPORTED_ERRORS
        tail = f"\n  … and {more} more" if more > 0 else ""
        super().__init__(
            "import refused, nothing was written "
            f"({counted(len(self.problems), 'problem')}):\n{shown}{tail}"
        )


@dataclass
class ParsedReview:
    key: str  # content hash: the review's identity across re-imports and conditions
    row: int
    idea_ref: str  # the cleaned external idea id of the first row that carried the review
    reviewer_ref: str | None
    scores: dict[str, float]
    rationales: dict[str, str]
    familiarity: int | None
    familiarity_raw: str
    confidence: int | None
    confidence_raw: str
    minutes: float | None
    minutes_raw: str
    consent_raw: str
    honor_code_raw: str
    flags: list[str]
    extra: dict[str, Any]


@dataclass
class ParsedIdea:
    external_ids: dict[str, str]  # condition key -> external id
    topic: str
    title: str = ""
    author_institution: str = ""


@dataclass
class ParsedImport:
    source: str
    sha256: str
    metrics: list[str]
    conditions: dict[str, str]  # key -> kind
    topics: list[str]
    ideas: list[ParsedIdea]
    reviews: list[ParsedReview]
    # (review key, external idea id) for every row: which idea each review belongs to
    review_ideas: dict[str, str]
    summary: dict[str, Any] = field(default_factory=dict)


# --- value cleaning ------------------------------------------------------------------

_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")
_LEADING_INT = re.compile(r"^\s*(\d+)\b")
YES = {"yes", "y", "true", "1", "agree", "i agree", "i confirm", "confirmed"}
NO = {"no", "n", "false", "0", "disagree"}


def clean_id(value: Any) -> str:
    """Idea ids with stray inner or outer spaces (``Bias_1 _AI``) name the same idea."""
    return re.sub(r"\s+", "", str(value)) if value is not None else ""


def parse_minutes(value: Any) -> float | None:
    """'16 min', '15 minutes.', '40min', '1.5 h', '1h30' -> minutes; None if no number."""
    if value is None:
        return None
    text = str(value).strip().lower()
    if not text:
        return None
    hours = re.fullmatch(r"(\d+(?:[.,]\d+)?)\s*(?:h|hr|hrs|hour|hours)\.?", text)
    if hours:
        return float(hours.group(1).replace(",", ".")) * 60
    hm = re.fullmatch(r"(\d+)\s*h(?:ours?|rs?)?\s*(\d+)\s*(?:m|min|mins|minutes?)?\.?", text)
    if hm:
        return int(hm.group(1)) * 60 + float(hm.group(2))
    numbers = _NUMBER.findall(text)
    if len(numbers) == 1:
        return float(numbers[0].replace(",", "."))
    if len(numbers) == 2 and re.search(r"\d\s*(-|–|to)\s*\d", text):
        # A range such as "20-30 min": its midpoint, the raw text is kept beside it.
        a, b = (float(n.replace(",", ".")) for n in numbers)
        return (a + b) / 2
    return None


def parse_level(value: Any) -> int | None:
    """'3 (you have read multiple papers …)' -> 3; 4 -> 4; '' -> None."""
    if value is None:
        return None
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return int(value) if float(value).is_integer() else None
    m = _LEADING_INT.match(str(value))
    return int(m.group(1)) if m else None


def parse_yes_no(value: Any) -> bool | None:
    text = str(value).strip().lower().rstrip(".") if value is not None else ""
    if text in YES:
        return True
    if text in NO:
        return False
    return None


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def review_key(parts: Iterable[Any]) -> str:
    return hashlib.sha256(
        json.dumps(list(parts), sort_keys=True, default=str).encode()
    ).hexdigest()[:40]


# --- reading tables ------------------------------------------------------------------


def read_table(data: bytes, name: str) -> list[dict[str, Any]]:
    """Rows of a CSV, JSON (rows or parallel columns) or JSONL file, or ImportFailed
    (also for text the database cannot store, naming row and field)."""
    rows = _read_table(data, name)
    for i, row in enumerate(rows, start=1):
        problem = csvsafe.json_text_problem(row)
        if problem:
            raise ImportFailed([RowProblem(name, i, None, problem)])
    return rows


def _read_table(data: bytes, name: str) -> list[dict[str, Any]]:
    if not data.strip():
        raise ImportFailed([RowProblem(name, None, None, "the file is empty")])
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ImportFailed(
            [RowProblem(name, None, None, f"not UTF-8 text (byte {exc.start} cannot be decoded)")]
        ) from exc
    suffix = Path(name).suffix.lower()
    stripped = text.lstrip()
    if suffix == ".jsonl":
        rows = []
        for lineno, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                obj = jsonsafe.loads(line)
            except json.JSONDecodeError as exc:
                raise ImportFailed(
                    [RowProblem(name, lineno, None, f"not valid JSON: {exc.msg}")]
                ) from exc
            if not isinstance(obj, dict):
                raise ImportFailed(
                    [RowProblem(name, lineno, None, "each line must be a JSON object")]
                )
            rows.append(obj)
        if not rows:
            raise ImportFailed([RowProblem(name, None, None, "the file holds no rows")])
        return rows
    if suffix == ".json" or stripped[:1] in "[{":
        try:
            obj = jsonsafe.loads(text)
        except json.JSONDecodeError as exc:
            raise ImportFailed(
                [
                    RowProblem(
                        name,
                        None,
                        None,
                        f"not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}",
                    )
                ]
            ) from exc
        return _rows_from_json(obj, name)
    try:
        table = [r for r in csvsafe.csv_rows(text, name) if r]
    except csvsafe.ReadProblem as exc:
        raise ImportFailed([RowProblem(name, None, None, str(exc))]) from None
    if not table:
        raise ImportFailed([RowProblem(name, None, None, "the CSV has no header row")])
    header, rows = table[0], []
    for i, cells in enumerate(table[1:], start=1):
        if len(cells) > len(header):
            raise ImportFailed(
                [RowProblem(name, i, None, "the row has more cells than the header")]
            )
        # as csv.DictReader: cells missing at the end are None
        rows.append({h: (cells[k] if k < len(cells) else None) for k, h in enumerate(header)})
    if not rows:
        raise ImportFailed([RowProblem(name, None, None, "the file holds a header but no rows")])
    return rows


def _rows_from_json(obj: Any, name: str) -> list[dict[str, Any]]:
    if isinstance(obj, list):
        if not obj:
            raise ImportFailed([RowProblem(name, None, None, "the JSON list is empty")])
        for i, r in enumerate(obj, start=1):
            if not isinstance(r, dict):
                raise ImportFailed([RowProblem(name, i, None, "each list item must be an object")])
        return obj
    if isinstance(obj, dict):
        if not obj:
            raise ImportFailed([RowProblem(name, None, None, "the JSON object is empty")])
        lengths = {k: len(v) for k, v in obj.items() if isinstance(v, list)}
        not_lists = [k for k, v in obj.items() if not isinstance(v, list)]
        if not_lists:
            raise ImportFailed(
                [
                    RowProblem(name, None, k, "expected a list of values (a column)")
                    for k in not_lists
                ]
            )
        if len(set(lengths.values())) > 1:
            common = Counter(lengths.values()).most_common(1)[0][0]
            raise ImportFailed(
                [
                    RowProblem(name, None, k, f"column has {n} values, the others {common}")
                    for k, n in lengths.items()
                    if n != common
                ]
            )
        n = next(iter(lengths.values()))
        if n == 0:
            raise ImportFailed([RowProblem(name, None, None, "the columns hold no rows")])
        return [{k: obj[k][i] for k in obj} for i in range(n)]
    raise ImportFailed(
        [RowProblem(name, None, None, "expected a JSON list of rows or an object of columns")]
    )


# --- the generic row format ----------------------------------------------------------

STANDARD_FIELDS = IMPORT_FIELDS
REQUIRED_FIELDS = ("idea_id", "condition", "topic")


@dataclass
class Mapping_:
    """Which source column holds each field; metric columns are `<metric>` and
    `<metric>_rationale` in our vocabulary."""

    columns: dict[str, str]

    def get(self, row: Mapping[str, Any], key: str) -> Any:
        col = self.columns.get(key)
        return row.get(col) if col is not None else None


def mapping_fields(form: FormDefinition) -> list[str]:
    """Every field a mapping may name for `form`: the standard ones, each metric, and the
    rationale of each metric that asks for one."""
    rationales = [f"{m.key}_rationale" for m in form.metrics if m.rationale]
    return [*STANDARD_FIELDS, *form.metric_keys, *rationales]


def mapping_check(
    overrides: Mapping[str, str], *, form: FormDefinition, header: Iterable[str], name: str
) -> None:
    """Refuse a mapping that names a field the form lacks, or a column the file lacks."""
    fields = mapping_fields(form)
    columns = list(header)
    problems = []
    for key, col in overrides.items():
        if key not in fields:
            no_rationale = key.endswith("_rationale") and key[: -len("_rationale")] in fields
            why = (
                "the form asks no rationale for this metric"
                if no_rationale
                else "not a field of the study's form"
            )
            problems.append(
                RowProblem(
                    name,
                    None,
                    key,
                    f"mapped field {key!r}: {why} {form.key} v{form.version} "
                    f"(its metrics: {', '.join(form.metric_keys)})",
                )
            )
        elif col not in columns:
            problems.append(
                RowProblem(
                    name,
                    None,
                    key,
                    f"mapped to column {col!r}, which the file lacks "
                    f"(its columns: {', '.join(columns[:40])})",
                )
            )
    if problems:
        raise ImportFailed(problems)


def default_mapping(
    header: Iterable[str], metrics: Sequence[str], overrides: Mapping[str, str]
) -> Mapping_:
    """Map our fields to columns: explicit overrides first, then the usual names."""
    present = list(header)
    lower = {c.lower().strip(): c for c in present}
    cols: dict[str, str] = {}
    candidates: dict[str, list[str]] = {f: [f] for f in STANDARD_FIELDS}
    candidates["honor_code"] += ["no_ai", "pledge"]
    candidates["confidence"] += ["confidence_score"]
    candidates["institution"] += ["author_institution"]
    for m in metrics:
        candidates[m] = [f"{m}_score", m]
        candidates[f"{m}_rationale"] = [f"{m}_rationale"]
    for key, names in candidates.items():
        for n in names:
            if n.lower() in lower:
                cols[key] = lower[n.lower()]
                break
    cols.update(overrides)
    return Mapping_(cols)


@dataclass
class RowInput:
    """What the generic parser needs to know about the target study."""

    form: FormDefinition
    known_conditions: dict[str, str] | None  # key -> kind; None: accept new conditions
    condition_kinds: dict[str, str]  # kinds for new conditions, from the caller
    known_topics: set[str] | None = None


def parse_rows(
    rows: list[dict[str, Any]],
    *,
    name: str,
    sha256: str,
    target: RowInput,
    mapping: Mapping_,
    titles: Mapping[str, str] | None = None,
    condition_kind_guess: bool = True,
) -> ParsedImport:
    """Validate and clean rows of the generic shape into a ParsedImport (or ImportFailed)."""
    metrics = target.form.metric_keys
    _check_header(rows, name=name, mapping=mapping, metrics=metrics)
    reader = _RowReader(name, target, mapping, condition_kind_guess)
    for i, row in enumerate(rows, start=1):
        reader.read(i, row)
    if reader.problems:
        raise ImportFailed(reader.problems)
    grouped = _group_ideas(reader, titles or {})
    problems = [
        RowProblem(
            name,
            reader.reviews[key].row,
            "review_id",
            f"one review is attached to ideas {', '.join(keys_ideas)} that do not share all their reviews",
        )
        for key, keys_ideas in _reviews_spanning_ideas(reader.review_rows, grouped.by_set).items()
    ]
    if problems:
        raise ImportFailed(problems)
    seen_review_idea: dict[str, str] = {}
    for key, idea in reader.review_rows:
        seen_review_idea.setdefault(key, idea)
    return ParsedImport(
        source=name,
        sha256=sha256,
        metrics=list(metrics),
        conditions=reader.conditions,
        topics=sorted(reader.topic_counts),
        ideas=grouped.ideas,
        reviews=list(reader.reviews.values()),
        review_ideas=seen_review_idea,
        summary=_summary(reader, grouped, rows=len(rows), sha256=sha256),
    )


def _check_header(
    rows: list[dict[str, Any]], *, name: str, mapping: Mapping_, metrics: Sequence[str]
) -> None:
    """Refuse a file that lacks a required column or a column the mapping names."""
    problems: list[RowProblem] = []
    header = set().union(*(r.keys() for r in rows))
    for f in (*REQUIRED_FIELDS, *metrics):
        col = mapping.columns.get(f)
        if col is None or col not in header:
            wanted = col or (f"{f}_score or {f}" if f in metrics else f)
            problems.append(RowProblem(name, None, f, f"missing column (expected {wanted!r})"))
    for key, col in mapping.columns.items():
        if col not in header and key not in REQUIRED_FIELDS and key not in metrics:
            if key in STANDARD_FIELDS or key.endswith("_rationale"):
                continue
            problems.append(
                RowProblem(name, None, key, f"mapped to column {col!r}, which the file lacks")
            )
    if problems:
        raise ImportFailed(problems)


@dataclass
class _Answers:
    """One row's answers to the form, cleaned, with their raw text."""

    scores: dict[str, float]
    rationales: dict[str, str]
    familiarity: int | None
    familiarity_raw: Any
    confidence: int | None
    confidence_raw: Any
    minutes: float | None
    minutes_raw: Any


@dataclass
class _RowReader:
    """The generic parser's state while it reads rows: what each idea id was given, the
    reviews found so far, every problem, and the counts the summary reports."""

    name: str
    target: RowInput
    mapping: Mapping_
    condition_kind_guess: bool
    problems: list[RowProblem] = field(default_factory=list)
    cleaned: Counter[str] = field(default_factory=Counter)
    flagged: Counter[str] = field(default_factory=Counter)
    cond_counts: Counter[str] = field(default_factory=Counter)
    topic_counts: Counter[str] = field(default_factory=Counter)
    conditions: dict[str, str] = field(default_factory=dict)  # key -> kind
    idea_topic: dict[str, str] = field(default_factory=dict)
    idea_condition: dict[str, str] = field(default_factory=dict)
    idea_inst: dict[str, str] = field(default_factory=dict)
    idea_title: dict[str, str] = field(default_factory=dict)
    reviews: dict[str, ParsedReview] = field(default_factory=dict)
    review_rows: list[tuple[str, str]] = field(default_factory=list)  # (review key, idea id)
    minutes_unparsed: int = 0

    def read(self, i: int, row: Mapping[str, Any]) -> None:
        placed = self._idea(i, row)
        if placed is None:
            return
        answers = self._answers(i, row)
        if answers is not None:
            self._store(i, row, *placed, answers)

    def _problem(self, i: int, field_: str, message: str) -> None:
        self.problems.append(RowProblem(self.name, i, field_, message))

    def _condition(self, i: int, cond: str) -> bool:
        """Record the row's condition and its kind; False (with a problem) if unknown."""
        known = self.target.known_conditions
        if not cond:
            self._problem(i, "condition", "empty condition")
            return False
        if known is not None and cond not in known:
            have = ", ".join(sorted(known))
            self._problem(i, "condition", f"unknown condition {cond!r} (this study has: {have})")
            return False
        if cond not in self.conditions:
            if known is not None:
                self.conditions[cond] = known[cond]
            elif cond in self.target.condition_kinds:
                self.conditions[cond] = self.target.condition_kinds[cond]
            elif self.condition_kind_guess:
                self.conditions[cond] = "human" if "human" in cond.lower() else "ai"
            else:
                # The caller named the human conditions; every other one is AI.
                self.conditions[cond] = "ai"
        return True

    def _idea(self, i: int, row: Mapping[str, Any]) -> tuple[str, str, str] | None:
        """(idea id, condition, topic) of the row, checked against earlier rows."""
        g = self.mapping.get
        raw_idea = g(row, "idea_id")
        idea = clean_id(raw_idea)
        if not idea:
            self._problem(i, "idea_id", "empty idea id")
            return None
        if str(raw_idea) != idea:
            self.cleaned["idea_id: spaces removed"] += 1
        cond = str(g(row, "condition") or "").strip()
        if not self._condition(i, cond):
            return None
        topic = str(g(row, "topic") or "").strip()
        if not topic:
            self._problem(i, "topic", "empty topic")
            return None
        if self.target.known_topics is not None and topic not in self.target.known_topics:
            self._problem(i, "topic", f"unknown topic {topic!r}")
            return None
        earlier_topic = self.idea_topic.get(idea, topic)
        if earlier_topic != topic:
            self._problem(
                i,
                "topic",
                f"idea {idea!r} was given topic {earlier_topic!r} earlier, now {topic!r}",
            )
            return None
        earlier_cond = self.idea_condition.get(idea, cond)
        if earlier_cond != cond:
            self._problem(
                i,
                "condition",
                f"idea id {idea!r} appears under {earlier_cond!r} and {cond!r}; "
                "give each condition its own id (or the same review_id to share reviews)",
            )
            return None
        self.idea_topic[idea] = topic
        self.idea_condition[idea] = cond
        inst = str(g(row, "institution") or "").strip()
        if inst:
            self.idea_inst[idea] = inst
        title = str(g(row, "title") or "").strip()
        if title:
            self.idea_title[idea] = title
        return idea, cond, topic

    def _scores(self, i: int, row: Mapping[str, Any]) -> tuple[dict[str, float], dict[str, str]]:
        """Each metric's score inside its scale, and its rationale; problems for the rest."""
        scores: dict[str, float] = {}
        rationales: dict[str, str] = {}
        for scale in self.target.form.metrics:
            m = scale.key
            raw = self.mapping.get(row, m)
            value = _number(raw)
            column = self.mapping.columns.get(m, m)
            if value is None:
                self._problem(i, column, f"score {raw!r} is not a number")
                continue
            if not scale.contains(value):
                self._problem(
                    i,
                    column,
                    f"score {raw!r} is outside the form's range {scale.minimum}–{scale.maximum}",
                )
                continue
            scores[m] = value
            rationales[m] = str(self.mapping.get(row, f"{m}_rationale") or "")
        return scores, rationales

    def _level(
        self, i: int, row: Mapping[str, Any], question: Scale
    ) -> tuple[int | None, Any, bool]:
        """A familiarity or confidence answer: (level, raw, inside the form's scale)."""
        raw = self.mapping.get(row, question.key)
        level = parse_level(raw)
        ok = raw in (None, "") or level is None or question.contains(level)
        if not ok:
            self._problem(
                i,
                self.mapping.columns[question.key],
                f"{question.key} {raw!r} is outside the form's range {question.range_text()}",
            )
        if level is not None and str(raw).strip() != str(level):
            self.cleaned[f"{question.key}: level read from text"] += 1
        return level, raw, ok

    def _answers(self, i: int, row: Mapping[str, Any]) -> _Answers | None:
        before = len(self.problems)
        scores, rationales = self._scores(i, row)
        fam, fam_raw, _ = self._level(i, row, self.target.form.familiarity)
        conf, conf_raw, _ = self._level(i, row, self.target.form.confidence)
        min_raw = self.mapping.get(row, "minutes")
        minutes = parse_minutes(min_raw)
        if min_raw not in (None, "") and minutes is None:
            self.minutes_unparsed += 1
        elif minutes is not None and str(min_raw).strip() != _fmt(minutes):
            self.cleaned["minutes: number read from text"] += 1
        if len(self.problems) > before:
            return None
        return _Answers(scores, rationales, fam, fam_raw, conf, conf_raw, minutes, min_raw)

    def _flags(self, consent_raw: str, pledge_raw: str) -> list[str]:
        flags: list[str] = []
        if "consent" in self.mapping.columns and parse_yes_no(consent_raw) is not True:
            flags.append("no_consent" if parse_yes_no(consent_raw) is False else "consent_unclear")
        if "honor_code" in self.mapping.columns and parse_yes_no(pledge_raw) is not True:
            flags.append(
                "ai_pledge_declined" if parse_yes_no(pledge_raw) is False else "ai_pledge_unclear"
            )
        self.flagged.update(flags)
        return flags

    def _store(
        self, i: int, row: Mapping[str, Any], idea: str, cond: str, topic: str, a: _Answers
    ) -> None:
        """Keep the row's review (once per review key) and which idea it belongs to."""
        g = self.mapping.get
        metrics = self.target.form.metric_keys
        consent_raw = "" if g(row, "consent") is None else str(g(row, "consent"))
        pledge_raw = "" if g(row, "honor_code") is None else str(g(row, "honor_code"))
        flags = self._flags(consent_raw, pledge_raw)
        extra = {
            c: row[c]
            for c in row
            if c not in self.mapping.columns.values() and not isinstance(row[c], dict | list)
        }
        ts = g(row, "timestamp")
        if ts not in (None, ""):
            extra["timestamp"] = ts
        rid = g(row, "review_id")
        content = [
            g(row, "reviewer_id"),
            ts,
            [a.scores[m] for m in metrics],
            [a.rationales[m] for m in metrics],
            str(a.familiarity_raw),
            str(a.confidence_raw),
            str(a.minutes_raw),
            consent_raw,
            pledge_raw,
        ]
        key = review_key(["id", str(rid)]) if rid not in (None, "") else review_key(content)
        if key in self.reviews:
            if self.reviews[key].scores != a.scores:
                self._problem(i, "review_id", f"review {rid!r} appears twice with different scores")
                return
        else:
            reviewer = g(row, "reviewer_id")
            self.reviews[key] = ParsedReview(
                key=key,
                row=i,
                idea_ref=idea,
                reviewer_ref=str(reviewer).strip() if reviewer not in (None, "") else None,
                scores=a.scores,
                rationales=a.rationales,
                familiarity=a.familiarity,
                familiarity_raw="" if a.familiarity_raw is None else str(a.familiarity_raw),
                confidence=a.confidence,
                confidence_raw="" if a.confidence_raw is None else str(a.confidence_raw),
                minutes=a.minutes,
                minutes_raw="" if a.minutes_raw is None else str(a.minutes_raw),
                consent_raw=consent_raw,
                honor_code_raw=pledge_raw,
                flags=flags,
                extra=extra,
            )
        self.review_rows.append((key, idea))
        self.cond_counts[cond] += 1
        self.topic_counts[topic] += 1


@dataclass
class _Grouped:
    ideas: list[ParsedIdea]
    by_set: dict[frozenset[str], list[str]]  # review keys -> the idea ids carrying them
    merged: int
    partial_shares: list[str]


def _group_ideas(reader: _RowReader, titles: Mapping[str, str]) -> _Grouped:
    """Ideas that carry exactly the same reviews under different ids are one idea in
    several conditions (Si et al.: AI ideas also selected into AI_Rerank)."""
    keys_of: dict[str, set[str]] = defaultdict(set)
    for key, idea in reader.review_rows:
        keys_of[idea].add(key)
    by_set: dict[frozenset[str], list[str]] = defaultdict(list)
    for idea, keys in keys_of.items():
        by_set[frozenset(keys)].append(idea)
    cond_of, topic_of = reader.idea_condition, reader.idea_topic
    ideas: list[ParsedIdea] = []
    merged = 0
    partial_shares: list[str] = []
    for idea_ids in by_set.values():
        conds = [cond_of[x] for x in idea_ids]
        if len(idea_ids) > 1 and len(set(conds)) == len(conds):
            merged += len(idea_ids) - 1
        elif len(idea_ids) > 1:
            # Same reviews under two ids of one condition: keep them apart, report it.
            partial_shares.append(", ".join(sorted(idea_ids)))
            ideas += [
                ParsedIdea(
                    {cond_of[x]: x},
                    topic_of[x],
                    reader.idea_title.get(x, ""),
                    reader.idea_inst.get(x, ""),
                )
                for x in idea_ids
            ]
            continue
        ordered = sorted(
            idea_ids, key=lambda x: (reader.conditions[cond_of[x]] != "human", cond_of[x], x)
        )
        topics = {topic_of[x] for x in ordered}
        if len(topics) > 1:
            raise ImportFailed(
                [
                    RowProblem(
                        reader.name,
                        None,
                        "topic",
                        f"ideas {', '.join(ordered)} share reviews but not a topic",
                    )
                ]
            )
        title = next(
            (
                reader.idea_title.get(x) or titles.get(x, "")
                for x in ordered
                if reader.idea_title.get(x) or titles.get(x)
            ),
            "",
        )
        inst = next((reader.idea_inst[x] for x in ordered if x in reader.idea_inst), "")
        ideas.append(ParsedIdea({cond_of[x]: x for x in ordered}, topics.pop(), title, inst))
    return _Grouped(ideas, by_set, merged, partial_shares)


def _summary(reader: _RowReader, grouped: _Grouped, *, rows: int, sha256: str) -> dict[str, Any]:
    """The data-quality summary of a parsed file (see format_quality_summary)."""
    reviews, ideas = reader.reviews, grouped.ideas
    n_titles = sum(1 for i_ in ideas if i_.title)
    return {
        "source": reader.name,
        "sha256": sha256,
        "rows": rows,
        "unique_reviews": len(reviews),
        "ideas": len(ideas),
        "idea_ids": len(reader.idea_topic),
        "ideas_in_several_conditions": sum(1 for i_ in ideas if len(i_.external_ids) > 1),
        "conditions": dict(sorted(reader.cond_counts.items())),
        "condition_kinds": dict(sorted(reader.conditions.items())),
        "topics": dict(reader.topic_counts.most_common()),
        "reviewers": len({r.reviewer_ref for r in reviews.values() if r.reviewer_ref}),
        "values_cleaned": dict(reader.cleaned),
        "values_cleaned_total": sum(reader.cleaned.values()),
        "minutes_unparsed": reader.minutes_unparsed,
        "rows_flagged": sum(1 for k, _ in reader.review_rows if reviews[k].flags),
        "reviews_flagged": sum(1 for r in reviews.values() if r.flags),
        "flags": dict(reader.flagged),
        "ideas_with_title": n_titles,
        "ideas_without_title": len(ideas) - n_titles,
        "ids_sharing_reviews_within_a_condition": grouped.partial_shares,
        "merged_idea_ids": grouped.merged,
    }


def _reviews_spanning_ideas(
    review_rows: list[tuple[str, str]], by_set: Mapping[frozenset[str], list[str]]
) -> dict[str, list[str]]:
    group_of = {idea: tuple(sorted(ids)) for ids in by_set.values() for idea in ids}
    spans: dict[str, set[tuple[str, ...]]] = defaultdict(set)
    for key, idea in review_rows:
        spans[key].add(group_of[idea])
    return {k: sorted({i for g in v for i in g}) for k, v in spans.items() if len(v) > 1}


def _number(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    text = str(value).strip()
    try:
        return float(text)
    except ValueError:
        return None


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


# --- the si2024 release ---------------------------------------------------------------

SI2024_CONDITIONS = {"Human": "human", "AI": "ai", "AI_Rerank": "ai"}
SI2024_COLUMNS = {
    "idea_id": "idea_id",
    "condition": "condition",
    "topic": "topic",
    "familiarity": "familiarity",
    "confidence": "confidence_score",
    "minutes": "minutes",
    "consent": "consent",
    "honor_code": "no_ai",
    "timestamp": "timestamp",
    "novelty": "novelty_score",
    "novelty_rationale": "novelty_rationale",
    "excitement": "excitement_score",
    "excitement_rationale": "excitement_rationale",
    "feasibility": "feasibility_score",
    "feasibility_rationale": "feasibility_rationale",
    "effectiveness": "effectiveness_score",
    "effectiveness_rationale": "effectiveness_rationale",
    "overall": "overall_score",
    "overall_rationale": "overall_rationale",
}


def read_titles(data: bytes, name: str) -> dict[str, str]:
    rows = read_table(data, name)
    header = set(rows[0])
    id_col = next((c for c in header if c.strip().lower() in {"id", "idea_id"}), None)
    title_col = next((c for c in header if c.strip().lower().startswith("title")), None)
    problems = []
    if id_col is None:
        problems.append(RowProblem(name, None, "ID", "missing column (expected 'ID')"))
    if title_col is None:
        problems.append(
            RowProblem(name, None, "Title", "missing column (expected 'Title / Filename')")
        )
    if problems:
        raise ImportFailed(problems)
    assert id_col is not None and title_col is not None
    return {clean_id(r[id_col]): str(r[title_col]).strip() for r in rows if r.get(id_col)}


def parse_si2024(
    reviews: bytes,
    *,
    reviews_name: str,
    form: FormDefinition,
    titles: bytes | None = None,
    titles_name: str = "titles.csv",
    known_conditions: dict[str, str] | None = None,
) -> ParsedImport:
    rows = read_table(reviews, reviews_name)
    missing = [c for c in SI2024_COLUMNS.values() if c not in rows[0]]
    if missing:
        raise ImportFailed([RowProblem(reviews_name, None, c, "missing column") for c in missing])
    title_map = read_titles(titles, titles_name) if titles is not None else {}
    target = RowInput(
        form=form,
        known_conditions=known_conditions or dict(SI2024_CONDITIONS),
        condition_kinds=dict(SI2024_CONDITIONS),
    )
    parsed = parse_rows(
        rows,
        name=reviews_name,
        sha256=sha256_bytes(reviews + (titles or b"")),
        target=target,
        mapping=Mapping_(dict(SI2024_COLUMNS)),
        titles=title_map,
    )
    parsed.summary["titles_file_ids"] = len(title_map)
    return parsed


def format_quality_summary(summary: Mapping[str, Any]) -> list[str]:
    """The data-quality summary as short lines, for the command line and the web page."""
    created = summary.get("created", {})
    lines = [
        f"data-quality summary for {summary.get('source', '?')}",
        f"  rows: {summary['rows']} (one per review × condition); unique reviews: {summary['unique_reviews']}",
        f"  ideas: {summary['ideas']} ({summary['idea_ids']} ids; {summary['ideas_in_several_conditions']} ideas sit in several conditions)",
        "  conditions: " + ", ".join(f"{k} {v} rows" for k, v in summary["conditions"].items()),
        "  topics: " + ", ".join(f"{k} {v}" for k, v in summary["topics"].items()),
        f"  reviewers: {summary['reviewers'] or 'none identified (no reviewer column)'}",
        f"  values cleaned: {summary['values_cleaned_total']}"
        + "".join(f"\n    {k}: {v}" for k, v in summary["values_cleaned"].items()),
        f"  minutes that could not be read as a number: {summary['minutes_unparsed']} (raw text kept)",
        f"  rows flagged (kept, marked): {summary['rows_flagged']}"
        + "".join(f"\n    {k}: {v}" for k, v in summary["flags"].items()),
        f"  ideas without a title: {summary['ideas_without_title']}",
    ]
    if created:
        if summary.get("changed_anything"):
            lines.append(
                "  written: "
                + ", ".join(f"{v} new {k}" for k, v in created.items())
                + f"; {summary.get('unchanged_reviews', 0)} reviews were already there"
            )
        else:
            lines.append("  nothing changed: every review in the file is already in the study")
    return lines
