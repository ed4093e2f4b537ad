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

import csv
import hashlib
import io
import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .protocol import jsonsafe
from .protocol.forms import FormDefinition

MAX_REPORTED_ERRORS = 50


@dataclass(frozen=True)
class Problem:
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

    def __init__(self, problems: Sequence[Problem]):
        self.problems = list(problems)
        shown = "\n".join(f"  - {p}" for p in self.problems[:MAX_REPORTED_ERRORS])
        more = len(self.problems) - MAX_REPORTED_ERRORS
        tail = f"\n  … and {more} more" if more > 0 else ""
        super().__init__(
            f"import refused, nothing was written ({len(self.problems)} problem(s)):\n{shown}{tail}"
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
    """Rows of a CSV, JSON (rows or parallel columns) or JSONL file, or ImportFailed."""
    if not data.strip():
        raise ImportFailed([Problem(name, None, None, "the file is empty")])
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ImportFailed(
            [Problem(name, None, None, f"not UTF-8 text (byte {exc.start} cannot be decoded)")]
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
                    [Problem(name, lineno, None, f"not valid JSON: {exc.msg}")]
                ) from exc
            if not isinstance(obj, dict):
                raise ImportFailed([Problem(name, lineno, None, "each line must be a JSON object")])
            rows.append(obj)
        if not rows:
            raise ImportFailed([Problem(name, None, None, "the file holds no rows")])
        return rows
    if suffix == ".json" or stripped[:1] in "[{":
        try:
            obj = jsonsafe.loads(text)
        except json.JSONDecodeError as exc:
            raise ImportFailed(
                [
                    Problem(
                        name,
                        None,
                        None,
                        f"not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}",
                    )
                ]
            ) from exc
        return _rows_from_json(obj, name)
    reader = csv.DictReader(io.StringIO(text))
    if not reader.fieldnames:
        raise ImportFailed([Problem(name, None, None, "the CSV has no header row")])
    rows = [dict(r) for r in reader]
    for i, r in enumerate(rows, start=1):
        if None in r:
            raise ImportFailed([Problem(name, i, None, "the row has more cells than the header")])
    if not rows:
        raise ImportFailed([Problem(name, None, None, "the file holds a header but no rows")])
    return rows


def _rows_from_json(obj: Any, name: str) -> list[dict[str, Any]]:
    if isinstance(obj, list):
        if not obj:
            raise ImportFailed([Problem(name, None, None, "the JSON list is empty")])
        for i, r in enumerate(obj, start=1):
            if not isinstance(r, dict):
                raise ImportFailed([Problem(name, i, None, "each list item must be an object")])
        return obj
    if isinstance(obj, dict):
        if not obj:
            raise ImportFailed([Problem(name, None, None, "the JSON object is empty")])
        lengths = {k: len(v) for k, v in obj.items() if isinstance(v, list)}
        not_lists = [k for k, v in obj.items() if not isinstance(v, list)]
        if not_lists:
            raise ImportFailed(
                [Problem(name, None, k, "expected a list of values (a column)") for k in not_lists]
            )
        if len(set(lengths.values())) > 1:
            common = Counter(lengths.values()).most_common(1)[0][0]
            raise ImportFailed(
                [
                    Problem(name, None, k, f"column has {n} values, the others {common}")
                    for k, n in lengths.items()
                    if n != common
                ]
            )
        n = next(iter(lengths.values()))
        if n == 0:
            raise ImportFailed([Problem(name, None, None, "the columns hold no rows")])
        return [{k: obj[k][i] for k in obj} for i in range(n)]
    raise ImportFailed(
        [Problem(name, None, None, "expected a JSON list of rows or an object of columns")]
    )


# --- the generic row format ----------------------------------------------------------

STANDARD_FIELDS = (
    "idea_id",
    "condition",
    "topic",
    "reviewer_id",
    "review_id",
    "title",
    "institution",
    "familiarity",
    "confidence",
    "minutes",
    "consent",
    "honor_code",
    "timestamp",
)
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
                Problem(
                    name,
                    None,
                    key,
                    f"mapped field {key!r}: {why} {form.key} v{form.version} "
                    f"(its metrics: {', '.join(form.metric_keys)})",
                )
            )
        elif col not in columns:
            problems.append(
                Problem(
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
    form = target.form
    metrics = form.metric_keys
    problems: list[Problem] = []
    header = set().union(*(r.keys() for r in rows))
    for f in (*REQUIRED_FIELDS, *metrics):
        col = mapping.columns.get(f)
        if col is None or col not in header:
            wanted = col or (f"{f}_score or {f}" if f in metrics else f)
            problems.append(Problem(name, None, f, f"missing column (expected {wanted!r})"))
    for key, col in mapping.columns.items():
        if col not in header and key not in REQUIRED_FIELDS and key not in metrics:
            if key in STANDARD_FIELDS or key.endswith("_rationale"):
                continue
            problems.append(
                Problem(name, None, key, f"mapped to column {col!r}, which the file lacks")
            )
    if problems:
        raise ImportFailed(problems)

    cleaned: Counter[str] = Counter()
    flagged: Counter[str] = Counter()
    cond_counts: Counter[str] = Counter()
    topic_counts: Counter[str] = Counter()
    conditions: dict[str, str] = {}
    idea_topic: dict[str, str] = {}
    idea_condition: dict[str, str] = {}
    idea_inst: dict[str, str] = {}
    idea_title: dict[str, str] = {}
    reviews: dict[str, ParsedReview] = {}
    review_rows: list[tuple[str, str]] = []
    minutes_unparsed = 0

    for i, row in enumerate(rows, start=1):
        g = lambda k, row=row: mapping.get(row, k)  # noqa: E731
        raw_idea = g("idea_id")
        idea = clean_id(raw_idea)
        if not idea:
            problems.append(Problem(name, i, "idea_id", "empty idea id"))
            continue
        if str(raw_idea) != idea:
            cleaned["idea_id: spaces removed"] += 1
        cond = str(g("condition") or "").strip()
        if not cond:
            problems.append(Problem(name, i, "condition", "empty condition"))
            continue
        if target.known_conditions is not None and cond not in target.known_conditions:
            known = ", ".join(sorted(target.known_conditions))
            problems.append(
                Problem(
                    name, i, "condition", f"unknown condition {cond!r} (this study has: {known})"
                )
            )
            continue
        if cond not in conditions:
            if target.known_conditions is not None:
                conditions[cond] = target.known_conditions[cond]
            elif cond in target.condition_kinds:
                conditions[cond] = target.condition_kinds[cond]
            elif condition_kind_guess:
                conditions[cond] = "human" if "human" in cond.lower() else "ai"
            else:
                # The caller named the human conditions; every other one is AI.
                conditions[cond] = "ai"
        topic = str(g("topic") or "").strip()
        if not topic:
            problems.append(Problem(name, i, "topic", "empty topic"))
            continue
        if target.known_topics is not None and topic not in target.known_topics:
            problems.append(Problem(name, i, "topic", f"unknown topic {topic!r}"))
            continue
        if idea in idea_topic and idea_topic[idea] != topic:
            problems.append(
                Problem(
                    name,
                    i,
                    "topic",
                    f"idea {idea!r} was given topic {idea_topic[idea]!r} earlier, now {topic!r}",
                )
            )
            continue
        if idea in idea_condition and idea_condition[idea] != cond:
            problems.append(
                Problem(
                    name,
                    i,
                    "condition",
                    f"idea id {idea!r} appears under {idea_condition[idea]!r} and {cond!r}; "
                    "give each condition its own id (or the same review_id to share reviews)",
                )
            )
            continue
        idea_topic[idea] = topic
        idea_condition[idea] = cond
        inst = str(g("institution") or "").strip()
        if inst:
            idea_inst[idea] = inst
        title = str(g("title") or "").strip()
        if title:
            idea_title[idea] = title

        scores: dict[str, float] = {}
        rationales: dict[str, str] = {}
        row_ok = True
        for m in metrics:
            scale = form.metric(m)
            raw = g(m)
            value = _number(raw)
            if value is None:
                problems.append(
                    Problem(name, i, mapping.columns.get(m, m), f"score {raw!r} is not a number")
                )
                row_ok = False
                continue
            if not scale.contains(value):
                problems.append(
                    Problem(
                        name,
                        i,
                        mapping.columns.get(m, m),
                        f"score {raw!r} is outside the form's range {scale.minimum}–{scale.maximum}",
                    )
                )
                row_ok = False
                continue
            scores[m] = value
            rationales[m] = str(g(f"{m}_rationale") or "")
        fam_raw = g("familiarity")
        fam = parse_level(fam_raw)
        if fam_raw not in (None, "") and fam is not None and not form.familiarity.contains(fam):
            problems.append(
                Problem(
                    name,
                    i,
                    mapping.columns["familiarity"],
                    f"familiarity {fam_raw!r} is outside the form's range {form.familiarity.range_text()}",
                )
            )
            row_ok = False
        if fam is not None and str(fam_raw).strip() != str(fam):
            cleaned["familiarity: level read from text"] += 1
        conf_raw = g("confidence")
        conf = parse_level(conf_raw)
        if conf_raw not in (None, "") and conf is not None and not form.confidence.contains(conf):
            problems.append(
                Problem(
                    name,
                    i,
                    mapping.columns["confidence"],
                    f"confidence {conf_raw!r} is outside the form's range {form.confidence.range_text()}",
                )
            )
            row_ok = False
        if conf is not None and str(conf_raw).strip() != str(conf):
            cleaned["confidence: level read from text"] += 1
        min_raw = g("minutes")
        minutes = parse_minutes(min_raw)
        if min_raw not in (None, "") and minutes is None:
            minutes_unparsed += 1
        elif minutes is not None and str(min_raw).strip() != _fmt(minutes):
            cleaned["minutes: number read from text"] += 1
        if not row_ok:
            continue

        flags: list[str] = []
        consent_raw = "" if g("consent") is None else str(g("consent"))
        pledge_raw = "" if g("honor_code") is None else str(g("honor_code"))
        if "consent" in mapping.columns and parse_yes_no(consent_raw) is not True:
            flags.append("no_consent" if parse_yes_no(consent_raw) is False else "consent_unclear")
        if "honor_code" in mapping.columns and parse_yes_no(pledge_raw) is not True:
            flags.append(
                "ai_pledge_declined" if parse_yes_no(pledge_raw) is False else "ai_pledge_unclear"
            )
        for f_ in flags:
            flagged[f_] += 1

        extra = {
            c: row[c]
            for c in row
            if c not in mapping.columns.values() and not isinstance(row[c], dict | list)
        }
        ts = g("timestamp")
        if ts not in (None, ""):
            extra["timestamp"] = ts
        rid = g("review_id")
        content = [
            g("reviewer_id"),
            ts,
            [scores[m] for m in metrics],
            [rationales[m] for m in metrics],
            str(fam_raw),
            str(conf_raw),
            str(min_raw),
            consent_raw,
            pledge_raw,
        ]
        key = review_key(["id", str(rid)]) if rid not in (None, "") else review_key(content)
        if key in reviews:
            prev = reviews[key]
            if prev.scores != scores:
                problems.append(
                    Problem(
                        name, i, "review_id", f"review {rid!r} appears twice with different scores"
                    )
                )
                continue
        else:
            reviewer = g("reviewer_id")
            reviews[key] = ParsedReview(
                key=key,
                row=i,
                idea_ref=idea,
                reviewer_ref=str(reviewer).strip() if reviewer not in (None, "") else None,
                scores=scores,
                rationales=rationales,
                familiarity=fam,
                familiarity_raw="" if fam_raw is None else str(fam_raw),
                confidence=conf,
                confidence_raw="" if conf_raw is None else str(conf_raw),
                minutes=minutes,
                minutes_raw="" if min_raw is None else str(min_raw),
                consent_raw=consent_raw,
                honor_code_raw=pledge_raw,
                flags=flags,
                extra=extra,
            )
        review_rows.append((key, idea))
        cond_counts[cond] += 1
        topic_counts[topic] += 1
    if problems:
        raise ImportFailed(problems)

    # Ideas that carry exactly the same reviews under different ids are one idea in
    # several conditions (Si et al.: AI ideas also selected into AI_Rerank).
    reviews_of: dict[str, frozenset[str]] = {}
    tmp: dict[str, set[str]] = defaultdict(set)
    for key, idea in review_rows:
        tmp[idea].add(key)
    reviews_of = {k: frozenset(v) for k, v in tmp.items()}
    by_set: dict[frozenset[str], list[str]] = defaultdict(list)
    for idea, keys in reviews_of.items():
        by_set[keys].append(idea)
    ideas: list[ParsedIdea] = []
    merged = 0
    partial_shares: list[str] = []
    seen_review_idea: dict[str, str] = {}
    for idea_ids in by_set.values():
        conds = [idea_condition[x] for x in idea_ids]
        if len(idea_ids) > 1 and len(set(conds)) == len(conds):
            merged += len(idea_ids) - 1
        elif len(idea_ids) > 1:
            # Same reviews under two ids of one condition: keep them apart, report it.
            partial_shares.append(", ".join(sorted(idea_ids)))
            for x in idea_ids:
                ideas.append(
                    ParsedIdea(
                        {idea_condition[x]: x},
                        idea_topic[x],
                        idea_title.get(x, ""),
                        idea_inst.get(x, ""),
                    )
                )
            continue
        ordered = sorted(
            idea_ids, key=lambda x: (conditions[idea_condition[x]] != "human", idea_condition[x], x)
        )
        ext = {idea_condition[x]: x for x in ordered}
        topics = {idea_topic[x] for x in ordered}
        if len(topics) > 1:
            raise ImportFailed(
                [
                    Problem(
                        name,
                        None,
                        "topic",
                        f"ideas {', '.join(ordered)} share reviews but not a topic",
                    )
                ]
            )
        title = next(
            (
                idea_title.get(x) or (titles or {}).get(x, "")
                for x in ordered
                if idea_title.get(x) or (titles or {}).get(x)
            ),
            "",
        )
        inst = next((idea_inst[x] for x in ordered if x in idea_inst), "")
        ideas.append(ParsedIdea(ext, topics.pop(), title, inst))
    for key, idea in review_rows:
        seen_review_idea.setdefault(key, idea)
    for key, keys_ideas in _reviews_spanning_ideas(review_rows, by_set).items():
        problems.append(
            Problem(
                name,
                reviews[key].row,
                "review_id",
                f"one review is attached to ideas {', '.join(keys_ideas)} that do not share all their reviews",
            )
        )
    if problems:
        raise ImportFailed(problems)

    n_titles = sum(1 for i_ in ideas if i_.title)
    summary = {
        "source": name,
        "sha256": sha256,
        "rows": len(rows),
        "unique_reviews": len(reviews),
        "ideas": len(ideas),
        "idea_ids": len(idea_topic),
        "ideas_in_several_conditions": sum(1 for i_ in ideas if len(i_.external_ids) > 1),
        "conditions": dict(sorted(cond_counts.items())),
        "condition_kinds": dict(sorted(conditions.items())),
        "topics": dict(topic_counts.most_common()),
        "reviewers": len({r.reviewer_ref for r in reviews.values() if r.reviewer_ref}),
        "values_cleaned": dict(cleaned),
        "values_cleaned_total": sum(cleaned.values()),
        "minutes_unparsed": minutes_unparsed,
        "rows_flagged": sum(1 for k, _ in review_rows if reviews[k].flags),
        "reviews_flagged": sum(1 for r in reviews.values() if r.flags),
        "flags": dict(flagged),
        "ideas_with_title": n_titles,
        "ideas_without_title": len(ideas) - n_titles,
        "ids_sharing_reviews_within_a_condition": partial_shares,
        "merged_idea_ids": merged,
    }
    return ParsedImport(
        source=name,
        sha256=sha256,
        metrics=list(metrics),
        conditions=conditions,
        topics=sorted(topic_counts),
        ideas=ideas,
        reviews=list(reviews.values()),
        review_ideas=seen_review_idea,
        summary=summary,
    )


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
        problems.append(Problem(name, None, "ID", "missing column (expected 'ID')"))
    if title_col is None:
        problems.append(
            Problem(name, None, "Title", "missing column (expected 'Title / Filename')")
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
        raise ImportFailed([Problem(reviews_name, None, c, "missing column") for c in missing])
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
