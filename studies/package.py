"""The reproducibility package: one zip a paper can cite (see docs/package.md).

De-identified data under stable pseudonyms, the form and its anchors, the assignment seed
and solver log, every judge run's prompts (with hashes), models, parameters and cached
responses, the software version and the report, plus a README saying how to re-run the
analysis with `import_reviews --format generic`.

Pseudonyms are HMACs of row identities keyed with the deployment's SECRET_KEY: the same
in every build, unrelated to names, institutions, external ids, conditions or the order
rows were created in (creation order often follows condition), and not computable by
anyone without the key.

The judge runs are judging's rows: judging contributes the `judges/` folder as a section
(`studies.package_sections`, registered from `JudgingConfig.ready()`; docs/architecture.md,
"Interfaces studies defines"). With no section registered the package has no `judges/`.
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import io
import json
import re
import zipfile
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.exceptions import SuspiciousFileOperation
from django.utils import timezone

from . import csvsafe
from .analysis.plan import plan_document, plan_hash
from .analysis.report import software_versions
from .models import (
    IdeaCondition,
    JobRun,
    PairJudgment,
    PairTask,
    Review,
    Reviewer,
    ReviewScore,
    Study,
    StudyReport,
)
from .package_sections import package_sections
from .preregistrations import study_preregistration
from .report_formats import TABLE_SUFFIX, report_format
from .services.audit import audit_chain_check
from .services.plans import plan_registration, study_plan, study_registered_plan
from .storage import reports_storage

PACKAGE_SCHEMA = "ideareview.package/1"

#: What assignment.json keeps of the committed preview's params as they are: the
#: solver's aggregate facts. The rest (pairs, fingerprint, the preview's tables, notes,
#: problems) names reviewers and ideas by the study's own ids.
SOLVER_FACTS = (
    "seed",
    "mode",
    "extra_load",
    "status",
    "objective",
    "solve_seconds",
    "committed_at",
)
#: The preview tables' aggregates (`preview_summary`), kept as they are.
SOLVER_SUMMARY_FACTS = (
    "conditions",
    "topics",
    "reviews_per_idea",
    "conditions_seen",
    "topic_choice",
    "conflicts_avoided",
    "reviewers_with_conflicts",
)


@dataclass
class Pseudonyms:
    """Stable, keyed pseudonyms for one study's ideas, memberships, reviewers and reviews."""

    study: Study
    used: dict[str, str] = field(default_factory=dict)

    def _make(self, prefix: str, *parts: Any) -> str:
        msg = ":".join([str(self.study.pk), prefix, *map(str, parts)]).encode()
        digest = hmac.new(settings.SECRET_KEY.encode(), msg, hashlib.sha256).hexdigest()
        name = f"{prefix}{digest[:10]}"
        owner = self.used.setdefault(name, msg.decode())
        if owner != msg.decode():  # 40-bit collision: never silently merge two rows
            raise RuntimeError(f"pseudonym collision on {name}")
        return name

    def idea(self, public_id: Any) -> str:
        return self._make("I", public_id)

    def membership(self, public_id: Any, condition: str) -> str:
        return self._make("C", public_id, condition)

    def reviewer(self, pk: Any) -> str:
        return self._make("R", pk)

    def review(self, pk: Any) -> str:
        return self._make("V", pk)

    def run(self, pk: Any) -> str:
        return self._make("J", pk)

    def earlier_idea(self, external_id: str) -> str:
        """An idea id of the study's earlier phase that this study does not have."""
        return self._make("E", external_id)


def _csv(rows: Iterable[dict[str, Any]], columns: list[str]) -> str:
    buf = io.StringIO()
    w = csvsafe.dict_writer(buf, fieldnames=columns, extrasaction="ignore")
    w.writeheader()
    for row in rows:
        w.writerow({k: "" if row.get(k) is None else row.get(k) for k in columns})
    return buf.getvalue()


def _json(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False, default=str, allow_nan=False) + "\n"


@dataclass
class PackageWriter:
    """What a section writes its folder with: the study, its pseudonyms (the same object
    the rest of the package uses, so a collision anywhere is caught), each idea's
    condition-free pseudonym by idea pk, and writers for files under `folder/`."""

    study: Study
    pseudonyms: Pseudonyms
    idea_names: dict[int, str]
    files: dict[str, str | bytes]
    folder: str

    def json(self, name: str, data: Any) -> None:
        self.files[f"{self.folder}/{name}"] = _json(data)

    def csv(self, name: str, rows: Iterable[dict[str, Any]], columns: list[str]) -> None:
        self.files[f"{self.folder}/{name}"] = _csv(rows, columns)

    def text(self, name: str, text: str) -> None:
        self.files[f"{self.folder}/{name}"] = text


def _replace_ids(value: Any, ids: dict[str, str], key: str | None = None) -> Any:
    """Swap external idea ids for pseudonyms wherever a field holds an idea id."""
    if isinstance(value, dict):
        return {k: _replace_ids(v, ids, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_ids(v, ids, key) for v in value]
    # leave_out: the plan's ideas left out of a phase comparison.
    if isinstance(value, str) and key in {"idea_id", "x", "y", "idea_a", "idea_b", "leave_out"}:
        return ids.get(value, value)
    return value


def _replace_every_id(value: Any, ids: dict[str, str], text: Any) -> Any:
    """Swap every string (values and keys) that is an idea id for its pseudonym, and the
    ids inside longer strings with `text`: the phase comparison holds ids in lists, as
    keys and in its notes, under many field names."""
    if isinstance(value, dict):
        return {ids.get(k, k): _replace_every_id(v, ids, text) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_every_id(v, ids, text) for v in value]
    if isinstance(value, str):
        return ids[value] if value in ids else text(value)
    return value


def _id_pattern(ids: Iterable[str]) -> re.Pattern[str] | None:
    """The ids as whole words of a text (longest first), or None for no ids."""
    ordered = sorted(ids, key=len, reverse=True)
    if not ordered:
        return None
    return re.compile(r"(?<![\w-])(" + "|".join(re.escape(k) for k in ordered) + r")(?![\w-])")


def _text_replacer(ids: dict[str, str]) -> Callable[[str], str]:
    """A function that swaps the ids inside a text for their pseudonyms. Lettered ids
    only: a bare number could be part of any figure in the text."""
    pattern = _id_pattern(k for k in ids if re.search(r"[A-Za-z]", k))
    if pattern is None:
        return lambda text: text
    return lambda text: pattern.sub(lambda m: ids[m.group(1)], text)


#: Report fields (JSON keys, CSV columns) that name a reviewer by their code in the study
#: (`Reviewer.pseudonym`, e.g. R001), and those that name a review by its row id.
REVIEWER_FIELDS = frozenset({"reviewer_id", "reviewer"})
REVIEW_FIELDS = frozenset({"review_id", "review_ids"})

# How a duplicate flag's detail names the other review (studies/analysis/quality.py).
_OTHER_REVIEW = re.compile(r"~ review (\d+)'s ")


@dataclass
class _People:
    """The report's reviewer codes and review ids → the pseudonyms data/reviews.csv gives
    the same reviewers and reviews, so the report's tables join the data. A value that
    is no code or review of this study (a judge's row, a count) stays as it is."""

    reviewers: dict[str, str]
    reviews: dict[str, str]

    def swap(self, value: Any, key: str | None = None) -> Any:
        """Every value under a reviewer or review field, anywhere in a JSON document."""
        if isinstance(value, dict):
            return {k: self.swap(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [self.swap(v, key) for v in value]
        if isinstance(value, bool) or not isinstance(value, str | int):
            return value
        if key in REVIEWER_FIELDS:
            return self.reviewers.get(str(value), value)
        if key in REVIEW_FIELDS:
            return self.reviews.get(str(value), value)
        return value

    def detail(self, kind: str, detail: str) -> str:
        """A flag's detail: a duplicate names the other review by its id, in a fixed
        phrase, so that one number can be swapped (a bare number elsewhere cannot)."""
        if not kind.startswith("duplicate"):
            return detail
        return _OTHER_REVIEW.sub(
            lambda m: f"~ review {self.reviews.get(m.group(1), m.group(1))}'s ", detail
        )

    def report_json(self, data: dict[str, Any]) -> dict[str, Any]:
        """report.json: the fields above, and the quality section's removed reviews and
        the flags' details."""
        data = self.swap(data)
        quality = data.get("quality")
        if isinstance(quality, dict):
            excl = quality.get("exclusion") or {}
            if isinstance(excl.get("removed"), list):
                excl["removed"] = self.swap(excl["removed"], "review_ids")
            for flag in quality.get("flags") or []:
                if isinstance(flag.get("detail"), str):
                    flag["detail"] = self.detail(str(flag.get("kind", "")), flag["detail"])
            if isinstance(quality.get("flags"), list):
                # Submission order, like the tables' rows: sorted by pseudonym instead.
                quality["flags"].sort(key=lambda f: (str(f.get("review_id")), str(f.get("kind"))))
        return data

    def table(self, body: str, in_text: Callable[[str], str]) -> str:
        """A report CSV, read with the csv module: reviewer and review columns swapped by
        value, every other cell through `in_text`. A table with no such column passes
        `in_text` whole, byte for byte as before."""
        rows = list(csv.reader(io.StringIO(body)))
        header = rows[0] if rows else []
        if not set(header) & (REVIEWER_FIELDS | REVIEW_FIELDS):
            return in_text(body)
        kind = header.index("kind") if "kind" in header else None
        swapped = []
        for row in rows[1:]:
            cells = []
            for k, cell in enumerate(row):
                name = header[k] if k < len(header) else ""
                if name in REVIEWER_FIELDS:
                    cells.append(self.reviewers.get(cell, cell))
                elif name in REVIEW_FIELDS:
                    cells.append(self.reviews.get(cell, cell))
                elif name == "detail" and kind is not None and kind < len(row):
                    cells.append(in_text(self.detail(row[kind], cell)))
                else:
                    cells.append(in_text(cell))
            swapped.append(cells)
        # Rows in the study, reviewer codes and review ids alike, follow sign-up and
        # submission order; sorted by their cells (the pseudonyms among them) the order
        # says nothing about time, as in data/.
        swapped.sort()
        buf = io.StringIO()
        w = csvsafe.writer(buf, lineterminator="\n")
        w.writerow(header)
        w.writerows(swapped)
        return buf.getvalue()


class _Collector:
    def __init__(self, study: Study) -> None:
        self.study = study
        self.p = Pseudonyms(study)
        self.files: dict[str, str | bytes] = {}
        self.idea_name: dict[int, str] = {}  # idea pk -> condition-free pseudonym
        self.external: dict[str, str] = {}  # external (per-condition) id -> pseudonym
        self._codes: dict[str, str] | None = None  # reviewer code (R001) -> pseudonym

    def data(self) -> None:
        study, p = self.study, self.p
        metrics = study.form_definition().metric_keys
        members: dict[int, list[tuple[str, str, str]]] = defaultdict(list)
        for member in (
            IdeaCondition.objects.filter(study=study)
            .select_related("condition", "idea")
            .order_by("condition__key", "external_id")
        ):
            public = member.idea.public_id
            self.idea_name[member.idea_id] = p.idea(public)
            name = p.membership(public, member.condition.key)
            self.external[member.external_id] = name
            members[member.idea_id].append((member.condition.key, member.condition.kind, name))
        scores: dict[int, dict[str, tuple[float, str]]] = defaultdict(dict)
        for rid, metric, score, rationale in ReviewScore.objects.filter(
            review__study=study, review__status=Review.Status.SUBMITTED
        ).values_list("review_id", "metric", "score", "rationale"):
            scores[rid][metric] = (score, rationale)
        reviews = list(
            Review.objects.filter(study=study, status=Review.Status.SUBMITTED)
            .select_related("idea__topic", "reviewer")
            .order_by("id")
        )
        with_consent = any(r.consent_raw for r in reviews)
        with_pledge = any(r.honor_code_raw for r in reviews)
        rows = []
        for r in reviews:
            for cond, _kind, name in sorted(members.get(r.idea_id, [])):
                row: dict[str, Any] = {
                    "review_id": p.review(r.pk),
                    "idea_id": name,
                    "condition": cond,
                    "topic": r.idea.topic.name,
                    "reviewer_id": p.reviewer(r.reviewer_id) if r.reviewer_id else "",
                    "familiarity": r.familiarity,
                    "confidence": r.confidence,
                    "minutes": "" if r.minutes is None else f"{r.minutes:g} min",
                    "consent": r.consent_raw,
                    "honor_code": r.honor_code_raw,
                }
                for m in metrics:
                    given = scores[r.pk].get(m)
                    row[m] = "" if given is None else f"{given[0]:g}"
                    row[f"{m}_rationale"] = "" if given is None else given[1]
                rows.append(row)
        # Rows sorted by pseudonym: their order then says nothing about condition or time.
        rows.sort(key=lambda row: (row["review_id"], row["condition"]))
        cols = ["review_id", "idea_id", "condition", "topic", "reviewer_id"]
        cols += [c for m in metrics for c in (m, f"{m}_rationale")]
        cols += ["familiarity", "confidence", "minutes"]
        cols += (["consent"] if with_consent else []) + (["honor_code"] if with_pledge else [])
        self.files["data/reviews.csv"] = _csv(rows, cols)

        ideas = []
        for idea in study.ideas.select_related("topic"):
            if idea.pk not in self.idea_name:
                continue
            text = idea.reviewable_text()
            ideas.append(
                {
                    "idea": self.idea_name[idea.pk],
                    "topic": idea.topic.name,
                    "conditions": ";".join(c for c, _, _ in sorted(members[idea.pk])),
                    "condition_ids": ";".join(n for _, _, n in sorted(members[idea.pk])),
                    "words": len(text.split()),
                    "text": text,
                }
            )
        ideas.sort(key=lambda r: str(r["idea"]))
        self.files["data/ideas.csv"] = _csv(
            ideas, ["idea", "topic", "conditions", "condition_ids", "words", "text"]
        )

        pairs = []
        for j in PairJudgment.objects.filter(
            task__study=study, task__status=PairTask.Status.SUBMITTED
        ).select_related("task"):
            t = j.task
            a, b = self.idea_name.get(t.idea_a_id), self.idea_name.get(t.idea_b_id)
            if a is None or b is None:
                continue
            pairs.append(
                {
                    "reviewer_id": p.reviewer(t.reviewer_id),
                    "idea_a": a,
                    "idea_b": b,
                    "shown_first": a if t.a_on_left else b,
                    "dimension": j.dimension,
                    "choice": j.choice,
                }
            )
        pairs.sort(key=lambda r: (r["reviewer_id"], r["idea_a"], r["idea_b"], r["dimension"]))
        self.files["data/pair_ratings.csv"] = _csv(
            pairs, ["reviewer_id", "idea_a", "idea_b", "shown_first", "dimension", "choice"]
        )
        conds = [{"key": c.key, "kind": c.kind, "label": c.label} for c in study.conditions.all()]
        self.files["data/study.json"] = _json(
            {
                "title": study.title,
                "baseline": study.baseline(),
                "conditions": conds,
                "metrics": metrics,
                "topics": sorted(t.name for t in study.topics.all()),
                "rows": len(rows),
                "unique_reviews": len(reviews),
                "ideas": len(ideas),
                "reviewers": len({r.reviewer_id for r in reviews if r.reviewer_id}),
                "pair_ratings": len(pairs),
            }
        )

    def design(self) -> None:
        study = self.study
        self.files["form.json"] = _json(
            {
                "key": study.review_form.key,
                "version": study.review_form.version,
                "title": study.review_form.title,
                "definition": study.review_form.definition,
            }
        )
        # The same definition as a form file, for `import_reviews --form` on a re-run.
        self.files["review_form.json"] = study.form_definition().to_json() + "\n"
        job = (
            JobRun.objects.filter(study=study, kind="assignment", params__has_key="committed_at")
            .order_by("-created_at")
            .first()
        )
        solver = None if job is None else self.solver_log(job)
        self.files["assignment.json"] = _json(
            {
                "seed": study.assignment_seed,
                "rules": {
                    "min_reviews_per_idea": study.min_reviews_per_idea,
                    "max_reviews_per_idea": study.max_reviews_per_idea,
                    "min_load": study.min_load,
                    "max_load": study.max_load,
                },
                "solver_log": solver,
                "note": None
                if solver
                else "no committed assignment in this study (e.g. imported reviews)",
            }
        )

    def reviewer_codes(self) -> dict[str, str]:
        """Each reviewer's code in the study (`Reviewer.pseudonym`, e.g. R001: what the
        solver and the report name reviewers by) → their pseudonym in data/."""
        if self._codes is None:
            self._codes = {
                code: self.p.reviewer(pk)
                for code, pk in Reviewer.objects.filter(study=self.study).values_list(
                    "pseudonym", "pk"
                )
            }
        return self._codes

    def solver_log(self, job: JobRun) -> dict[str, Any]:
        """The committed preview's log, de-identified. Its params are the owner's working
        copy: the pairs and the preview's tables name reviewers by their codes and ideas
        by their external ids (anything a researcher typed, a name even). Only the
        solver's aggregate facts are copied as they are, so a key added to the params
        later stays out until it is listed; the tables' rows carry the pseudonyms data/
        uses (a row whose id cannot be mapped is left out), and the notes and problems
        have their lettered ids swapped. A line that still names a numeric id as a word
        is withheld and counted: a bare number cannot be told from a figure."""
        params, codes = job.params, self.reviewer_codes()
        log: dict[str, Any] = {k: params[k] for k in SOLVER_FACTS if k in params}
        log["n_assignments"] = len(params.get("pairs") or [])
        log["message"] = job.message
        ids = {**codes, **self.external}
        in_text = _text_replacer(ids)
        numbers = _id_pattern(k for k in ids if not re.search(r"[A-Za-z]", k))
        for key in ("notes", "problems"):
            lines = [in_text(str(line)) for line in params.get(key) or []]
            log[key] = [line for line in lines if numbers is None or not numbers.search(line)]
            if len(log[key]) < len(lines):
                log[f"{key}_withheld"] = len(lines) - len(log[key])
        summary = params.get("summary")
        if summary:
            log["summary"] = self.solver_summary(summary, codes)
        return log

    def solver_summary(self, summary: dict[str, Any], codes: dict[str, str]) -> dict[str, Any]:
        """The preview's tables (`preview_summary`): the aggregates as they are, reviewer
        rows under `p.reviewer`, idea rows under the per-condition pseudonym of the id
        the solver used, each sorted by pseudonym (the solver's order follows creation
        and external ids)."""
        out = {k: summary[k] for k in SOLVER_SUMMARY_FACTS if k in summary}
        reviewers = [
            {**row, "reviewer": codes[row["reviewer"]]}
            for row in summary.get("reviewers") or []
            if row.get("reviewer") in codes
        ]
        ideas = [
            {**row, "idea": self.external[row["idea"]]}
            for row in summary.get("ideas") or []
            if row.get("idea") in self.external
        ]
        out["reviewers"] = sorted(reviewers, key=lambda r: r["reviewer"])
        out["ideas"] = sorted(ideas, key=lambda r: (str(r.get("topic", "")), r["idea"]))
        left_out = len(summary.get("reviewers") or []) + len(summary.get("ideas") or [])
        left_out -= len(reviewers) + len(ideas)
        if left_out:
            out["rows_left_out"] = left_out
        return out

    def people(self) -> _People:
        """The report's reviewer codes and review ids → the package's pseudonyms (every
        review of the study, gold ones too: a flag can name one)."""
        reviews = Review.objects.filter(study=self.study).values_list("pk", flat=True)
        return _People(self.reviewer_codes(), {str(pk): self.p.review(pk) for pk in reviews})

    def sections(self) -> None:
        """The folders other apps contribute (judging's `judges/`)."""
        for folder, section in package_sections.items():
            section(PackageWriter(self.study, self.p, self.idea_name, self.files, folder))

    def earlier_ids(self) -> dict[str, str]:
        """Pseudonyms of the earlier phase's idea ids that this study lacks (they appear
        in the phase comparison's lists of ideas in one phase only)."""
        earlier = self.study.previous_phase
        if earlier is None:
            return {}
        theirs = IdeaCondition.objects.filter(study=earlier).values_list("external_id", flat=True)
        return {e: self.p.earlier_idea(e) for e in sorted(set(theirs)) if e not in self.external}

    def id_map(self) -> dict[str, str]:
        """External idea id -> pseudonym, for this study's ids and its earlier phase's."""
        return {**self.earlier_ids(), **self.external}

    def report(self, files: dict[str, bytes]) -> list[str]:
        """The report's files (name → content), ids swapped for pseudonyms: idea ids, and
        reviewer codes and review ids as data/reviews.csv names them, so the report's
        tables (leniency, quality flags) join the data. Reviewer codes are lettered, so
        texts (the HTML) get them swapped too; review ids are bare numbers, swapped only
        where a field holds one (the HTML shows none)."""
        ids = self.id_map()
        people = self.people()
        # The idea ids win should a reviewer code equal one.
        in_text = _text_replacer({**people.reviewers, **ids})
        names = []
        for name, body in sorted(files.items()):
            if name == "package.zip":
                continue
            arc, suffix = f"report/{name}", Path(name).suffix
            if suffix == ".json":
                data = people.report_json(_replace_ids(json.loads(body), ids))
                data.get("study", {}).pop("slug", None)
                if "phases" in data:
                    data["phases"] = _replace_every_id(data["phases"], ids, in_text)
                self.files[arc] = _json(data)
            elif name.endswith(TABLE_SUFFIX):
                self.files[arc] = people.table(body.decode(), in_text)
            else:
                entry = _package_entry(name)
                if entry == "omit":
                    continue
                self.files[arc] = in_text(body.decode()) if entry == "swap" else body
            names.append(name)
        return names


def _package_entry(name: str) -> str:
    """How a report file enters the package: "swap" (the tables and every text format
    pass the pseudonym swap), "copy" (a binary format declared free of ids) or "omit"
    (the built-in PDF: printed from the report's HTML before any swap, it names the
    study's own idea ids and reviewer codes and cannot be swapped; the package's
    report.html is the same document, swapped)."""
    fmt = report_format(name)
    if name.endswith(TABLE_SUFFIX) or fmt is None or fmt.text:
        return "swap"
    if fmt.ids_free:
        return "copy"
    if fmt.write is None:
        return "omit"
    raise ValueError(f"report format {fmt.name}: binary, and not declared free of idea ids")


def _report_files(report: StudyReport | None, report_dir: Path | None) -> dict[str, bytes]:
    """A report's files: from the folder a build is still writing, or from the report's
    version in the reports storage."""
    if report_dir is not None:
        return {p.name: p.read_bytes() for p in report_dir.iterdir() if p.is_file()}
    if report is None:
        return {}
    storage = reports_storage()
    try:
        _, names = storage.listdir(report.directory)
    except (FileNotFoundError, SuspiciousFileOperation):
        return {}
    files = {}
    for name in names:
        with storage.open(f"{report.directory}/{name}", "rb") as fh:
            files[name] = fh.read()
    return files


def package_build(
    *,
    study: Study,
    out: Path,
    report: StudyReport | None = None,
    use_report: bool = True,
    report_dir: Path | None = None,
) -> dict[str, Any]:
    """Write the study's reproducibility package to `out` (a .zip); returns its manifest.

    The report's files come from `report_dir` (a build's own folder), else from
    `report` (default: the study's newest) in the reports storage."""
    if report is None and use_report and report_dir is None:
        report = StudyReport.objects.filter(study=study).first()
    c = _Collector(study)
    c.data()
    c.design()
    c.sections()
    report_files = c.report(_report_files(report, report_dir))
    human = [k.key for k in study.conditions.all() if k.kind == "human"]
    c.files["software.json"] = _json(software_versions())
    c.files.update(_plan_files(study, c.id_map()))
    # The audit log's head: the log itself stays on the server (its details name people),
    # but a later edit of it no longer matches this head.
    c.files["audit/chain.json"] = _json(audit_chain_check(study).as_dict())
    c.files["README.md"] = readme(study=study, human=human, report_files=report_files)
    manifest = {
        "schema": PACKAGE_SCHEMA,
        "generated_at": timezone.now().isoformat(timespec="seconds"),
        "software": software_versions(),
        "files": {
            name: hashlib.sha256(body.encode() if isinstance(body, str) else body).hexdigest()
            for name, body in sorted(c.files.items())
        },
    }
    c.files["manifest.json"] = _json(manifest)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".part")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name, body in sorted(c.files.items()):
            # A fixed timestamp: two builds of unchanged data give identical members.
            info = zipfile.ZipInfo(f"package/{name}", date_time=(2024, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, body)
    tmp.replace(out)
    return manifest


def _plan_files(study: Study, ids: dict[str, str]) -> dict[str, str]:
    """The analysis plan (usable with ``study_plan --set`` on the package's data), its
    registration and the pre-registration document. Idea ids the plan names (the ideas it
    leaves out of a phase comparison) carry their pseudonyms here; the hashes stated are
    those of the study's own documents, with the ids."""
    doc, markdown = study_preregistration(study)
    plan = study_plan(study)
    registered = study_registered_plan(study)
    registration = plan_registration(study)
    return {
        "plan/current.json": _json(_replace_ids(plan_document(plan), ids)),
        "plan/registration.json": _json(
            {
                "current_hash": plan_hash(plan),
                "registered": None
                if registered is None or registration is None
                else {**registration, "plan": _replace_ids(plan_document(registered), ids)},
                "deviation": registration is not None and registration["hash"] != plan_hash(plan),
            }
        ),
        "plan/preregistration.json": _json(_replace_ids(doc, ids)),
        "plan/preregistration.md": _text_replacer(ids)(markdown),
    }


def readme(*, study: Study, human: list[str], report_files: list[str]) -> str:
    baseline = study.baseline()
    metrics = ", ".join(study.form_definition().metric_keys)
    report_line = (
        "`report/` holds the report as built by ideareview: "
        + ", ".join(report_files)
        + ". The report's PDF is not here: it was printed before the pseudonyms went in, "
        "so it names the study's own ids; print `report/report.html` instead."
        if report_files
        else "No report had been built when this package was made."
    )
    return f"""# Reproducibility package: {study.title}

Made by ideareview (see `software.json` for the versions). Everything here is
de-identified: reviewers, reviews, ideas and judge runs carry pseudonyms (`R…`, `V…`,
`I…`/`C…`, `J…`) that are the same in every package built from this study but reveal no
name, institution, external id or condition. No reviewer name, e-mail, institution or
author institution is included. The conditions are published as the analysed factor.

## Contents
- `data/reviews.csv`: one row per review × condition, in ideareview's generic import format
  (`docs/import-format.md`): review_id, idea_id (one id per idea and condition), condition,
  topic, reviewer_id, one column per metric ({metrics}) and its rationale, familiarity,
  confidence, minutes. Rows sharing a review_id are one review of an idea that sits in
  several conditions.
- `data/ideas.csv`: each idea's pseudonym, topic, conditions, per-condition ids, and the
  signed-off text reviewers saw (empty when the study had no texts).
- `data/pair_ratings.csv`: reviewers' pair ratings (choice as the reviewer saw it;
  `shown_first` is the idea shown on the left).
- `data/study.json`: title, baseline, conditions (key and kind), metrics, topics, counts.
- `form.json`: the review form with every anchor; `review_form.json`: the same form as a
  form file (`docs/forms.md`), for `--form` below.
- `assignment.json`: the assignment seed, its rules and the solver's log (if the study was
  assigned in ideareview), its tables under the same pseudonyms as `data/`.
- `judges/runs.json`: each judge run: method, parameters, model, judge parameters and
  prices, cost, summary. `judges/prompts.json`: the prompt templates with their hashes.
  `judges/calls.jsonl`: every cached LLM call (request as sent, prompt hash, raw response,
  tokens, cost, latency). `judges/judgments.csv`, `pairwise_outcomes.csv`, `ratings.csv`:
  what the calls decided, with idea pseudonyms.
- {report_line}
- `plan/current.json`: the analysis plan the report followed (`docs/analysis-plan.md`);
  `plan/registration.json`: its hash and, when the plan was frozen (pre-registered), the
  registered plan with its hash and freeze time, and whether the two differ.
  `plan/preregistration.md` and `.json`: the pre-registration document (a datasheet of
  what was evaluated, by whom and how, the tests, exclusions and power analysis, with the
  plan's hash and the document's own).
- `audit/chain.json`: the study's audit log when the package was made: its number of
  entries, whether its hash chain verified, and its head (the last entry's hash). The
  log stays on the server; a later edit of it no longer leads to this head.
- `manifest.json`: SHA-256 of every file.

## Re-running the analysis
```
# a checkout of ideareview {software_versions()["ideareview"]}, set up as its README says
python manage.py migrate
python manage.py import_reviews --format generic --reviews package/data/reviews.csv \\
    --study rerun --form package/review_form.json \\
    --human-conditions {",".join(human) or "Human"} --baseline {baseline}
python manage.py study_plan rerun --set package/plan/current.json
python manage.py study_report rerun --out rerun-report
```
The per-condition tests (Tests 1 and 2), the mixed models and the consistency figures of
`rerun-report/report.json` match `report/report.json` (random parts use the seed in its
`options`). Judge agreement needs the judge rows above and is not re-imported by
`import_reviews`.
"""
