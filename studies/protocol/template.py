"""The seven-section proposal template, and a tolerant parser for proposals written to it.

Every idea in a study, human or AI, is shown to reviewers in one format so that reviewers
judge ideas rather than write-ups. People (and models) do not write headings the same way:
"## 3. Motivation", "**Motivation:**", "Section 3: Motivation" and "MOTIVATION" all mean
the same section, and "Experiments" or "Plan B" are common names for two of them. The
parser maps all of these onto the template, keeps every line of text, and reports what it
could not place so the owner can fix it before the idea is normalised.

Pure Python: no Django imports.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = [
    "SECTIONS",
    "SECTION_KEYS",
    "Section",
    "TemplateProblem",
    "ParsedProposal",
    "parse_sections",
    "render_sections",
    "match_heading",
    "heading_words",
    "word_count",
]


@dataclass(frozen=True)
class Section:
    """One section of the template.

    ``names`` are spellings accepted anywhere a heading may stand, even as a plain line
    ("Fallback Plan: ..."). ``weak_names`` are short, common words ("Method", "Examples")
    that count only when formatted as a heading (``#``, bold or numbered) or standing
    alone on a line, and only when they move the proposal forward: a bold "Problem:"
    inside a test case is text, not a second Problem Statement.
    """

    key: str
    heading: str
    guidance: str
    names: tuple[str, ...]
    weak_names: tuple[str, ...] = ()


SECTIONS: tuple[Section, ...] = (
    Section(
        key="title",
        heading="Title",
        guidance="One line naming the research question; it would serve as the paper title.",
        names=("title", "project title", "idea title", "proposal title", "paper title"),
    ),
    Section(
        key="problem_statement",
        heading="Problem Statement",
        guidance="The problem to be solved, and why it matters.",
        names=(
            "problem statement",
            "problem definition",
            "problem description",
            "research problem",
        ),
        weak_names=("problem",),
    ),
    Section(
        key="motivation",
        heading="Motivation",
        guidance="Where current methods fall short, and why the proposed one should do better.",
        names=("motivation", "background and motivation", "motivation and background"),
        weak_names=("background", "rationale"),
    ),
    Section(
        key="proposed_method",
        heading="Proposed Method",
        guidance="How the method works, with every essential step.",
        names=("proposed method", "proposed approach", "proposed methodology", "our method"),
        weak_names=("method", "methods", "methodology", "approach"),
    ),
    Section(
        key="experiment_plan",
        heading="Step-by-Step Experiment Plan",
        guidance="Each step of the experiments: datasets, models, metrics and example prompts.",
        names=(
            "step by step experiment plan",
            "step by step experimental plan",
            "step by step experiments plan",
            "step by step plan",
            "experiment plan",
            "experimental plan",
            "experiments plan",
            "experimental design",
            "experiment design",
            "experimental setup",
            "evaluation plan",
        ),
        weak_names=("experiments", "experiment"),
    ),
    Section(
        key="test_cases",
        heading="Test Case Examples",
        guidance=(
            "At least two concrete input/output examples: the baseline failing and the "
            "proposed method succeeding, each explained."
        ),
        names=("test case examples", "test cases", "example test cases"),
        weak_names=("examples", "test case", "test examples"),
    ),
    Section(
        key="fallback_plan",
        heading="Fallback Plan",
        guidance=(
            "What to do if the method does not work: debugging, ablations, or turning the "
            "project into an analysis."
        ),
        names=(
            "fallback plan",
            "fallback plans",
            "fallback strategy",
            "backup plan",
            "alternative plan",
            "alternative plans",
            "contingency plan",
            "plan b",
        ),
        weak_names=("fallback",),
    ),
)

SECTION_KEYS: tuple[str, ...] = tuple(s.key for s in SECTIONS)
_BY_KEY: dict[str, Section] = {s.key: s for s in SECTIONS}
_ORDER: dict[str, int] = {key: i for i, key in enumerate(SECTION_KEYS)}

# A preamble (text before the first heading) this short is taken as the title.
TITLE_MAX_WORDS = 30
TITLE_MAX_LINES = 2


def _norm(text: str) -> str:
    text = text.lower().replace("&", " and ")
    return " ".join(re.sub(r"[^0-9a-z]+", " ", text).split())


_STRONG: dict[str, str] = {_norm(n): s.key for s in SECTIONS for n in (s.heading, *s.names)}
_WEAK: dict[str, str] = {_norm(n): s.key for s in SECTIONS for n in s.weak_names}


def heading_words() -> frozenset[str]:
    """Lowercased words used in any section heading or its synonyms."""
    words: set[str] = set()
    for name in (*_STRONG, *_WEAK):
        words.update(name.split())
    return frozenset(words)


def match_heading(text: str) -> tuple[str, bool] | None:
    """Map a heading's text (without markup) to ``(section key, is_weak)``, or None."""
    for candidate in (text, re.sub(r"\s*\([^()]*\)\s*$", "", text)):
        n = _norm(candidate)
        if n in _STRONG:
            return _STRONG[n], False
        if n in _WEAK:
            return _WEAK[n], True
    return None


def word_count(text: str) -> int:
    return len(re.findall(r"\S+", text))


@dataclass(frozen=True)
class TemplateProblem:
    """Something about a proposal's structure the owner should look at.

    ``kind`` is one of ``missing``, ``empty``, ``duplicate``, ``unknown_heading``,
    ``preamble``. ``line`` is 1-based in the parsed text.
    """

    kind: str
    message: str
    section: str | None = None
    line: int | None = None


@dataclass(frozen=True)
class ParsedProposal:
    """A proposal split into the template's sections (keys of :data:`SECTION_KEYS`).

    ``sections`` holds every found section in template order, empty ones included, with
    its text stripped; text under an unknown heading stays in the section above it,
    heading line and all. ``preamble`` is text before the first section that was too
    long to be a title (it is not in ``sections``).
    """

    sections: dict[str, str]
    found: tuple[str, ...]
    missing: tuple[str, ...]
    empty: tuple[str, ...]
    duplicates: tuple[str, ...]
    unknown_headings: tuple[str, ...]
    preamble: str
    word_counts: dict[str, int]
    problems: tuple[TemplateProblem, ...] = field(default=())

    @property
    def total_words(self) -> int:
        return sum(self.word_counts.values()) + word_count(self.preamble)

    @property
    def is_complete(self) -> bool:
        """Every section present and non-empty."""
        return not self.missing and not self.empty

    @property
    def is_clean(self) -> bool:
        """Complete, and nothing else to report (no duplicates, unknown headings, preamble)."""
        return not self.problems


_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_MD_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s*(.*?)\s*#*\s*$")
_NUMBERING = re.compile(
    r"""^(?:
        (?:section|part|step)\s+(?:\d+|[ivx]+)\s*(?:[.):\-\u2013\u2014]\s*|\s+)  # Section 3:
      | \(?(?:\d+(?:\.\d+)*|[ivx]+|[a-g])\s*[.):]\s*                           # 1. 2) (iv)
      | \d+\s+(?=[a-z])                                                       # 1 Title
    )""",
    re.IGNORECASE | re.VERBOSE,
)
_EMPHASIS = re.compile(r"^(\*\*|__)(.+?)\1(.*)$")


@dataclass(frozen=True)
class _Heading:
    key: str | None  # None: a Markdown heading that names no section
    weak: bool
    inline: str  # text after the heading on the same line
    level: int | None  # Markdown level, None for bold/numbered/plain headings
    raw: str  # the heading as written, markup stripped


def _strip_numbering(text: str) -> tuple[str, bool]:
    m = _NUMBERING.match(text)
    if m and m.end() < len(text):
        return text[m.end() :], True
    return text, False


def _candidates(text: str) -> list[tuple[str, str, bool]]:
    """Ways to read ``text`` as a label plus inline content: (label, inline, formatted)."""
    text, numbered = _strip_numbering(text.strip())
    m = _EMPHASIS.match(text)
    if m:
        inside, after = m.group(2).strip(), m.group(3).strip()
        label = _strip_numbering(inside)[0]
        if inside.endswith(":"):
            return [(label.rstrip(":").strip(), after, True)]
        if after.startswith(":"):
            return [(label, after[1:].strip(), True)]
        if not after:
            return [(label, "", True)]
        return []  # bold words followed by prose: emphasis, not a heading
    out = [(text.rstrip(":").strip(), "", numbered)]
    if ":" in text:
        label, rest = text.split(":", 1)
        out.append((label.strip(), rest.strip(), numbered))
    return out


def _classify(line: str) -> _Heading | None:
    if not line.strip():
        return None
    md = _MD_HEADING.match(line)
    if md:
        level, content = len(md.group(1)), md.group(2)
        for label, inline, _ in _candidates(content):
            hit = match_heading(label)
            if hit:
                return _Heading(hit[0], hit[1], inline, level, label)
        return _Heading(None, False, "", level, _strip_markup(content).strip() or content)
    for label, inline, formatted in _candidates(line):
        hit = match_heading(label)
        # Weak names need heading formatting or a line of their own.
        if hit and (not hit[1] or formatted or not inline):
            return _Heading(hit[0], hit[1], inline, None, label)
    return None


def parse_sections(text: str) -> ParsedProposal:
    """Split a proposal into template sections; never raises on odd input."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    headings = _heading_lines(lines)
    known_levels = [h.level for h in headings.values() if h.key and h.level is not None]
    # Deeper Markdown headings than the sections' own are sub-headings: plain text.
    section_level = min(known_levels) if known_levels else 2
    split = _split_bodies(lines, headings, section_level)
    preamble_text = _title_from_preamble(split)
    bodies, first_line, problems = split.bodies, split.first_line, split.problems
    sections = {k: "\n".join(bodies[k]).strip() for k in SECTION_KEYS if k in bodies}
    missing = tuple(k for k in SECTION_KEYS if k not in sections)
    empty = tuple(k for k, v in sections.items() if not v)
    for k in missing:
        problems.append(
            TemplateProblem("missing", f"missing section: {_BY_KEY[k].heading}", section=k)
        )
    for k in empty:
        problems.append(
            TemplateProblem(
                "empty",
                f"line {first_line[k]}: section {_BY_KEY[k].heading} is empty",
                section=k,
                line=first_line[k],
            )
        )
    order = {"preamble": 0, "missing": 1, "empty": 2, "duplicate": 3, "unknown_heading": 4}
    problems.sort(key=lambda p: (order[p.kind], p.line or 0))
    return ParsedProposal(
        sections=sections,
        found=tuple(sections),
        missing=missing,
        empty=empty,
        duplicates=tuple(dict.fromkeys(split.duplicates)),
        unknown_headings=tuple(split.unknown),
        preamble=preamble_text,
        word_counts={k: word_count(v) for k, v in sections.items()},
        problems=tuple(problems),
    )


def _heading_lines(lines: list[str]) -> dict[int, _Heading]:
    """Which lines are headings (outside code fences), by line index."""
    headings: dict[int, _Heading] = {}
    in_fence = False
    for i, line in enumerate(lines):
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        h = _classify(line)
        if h is not None:
            headings[i] = h
    return headings


@dataclass
class _Split:
    """The lines of each section, in file order, and what went wrong on the way."""

    bodies: dict[str, list[str]] = field(default_factory=dict)
    first_line: dict[str, int] = field(default_factory=dict)
    duplicates: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    problems: list[TemplateProblem] = field(default_factory=list)
    preamble: list[str] = field(default_factory=list)


def _split_bodies(lines: list[str], headings: dict[int, _Heading], section_level: int) -> _Split:
    """Every line under the section heading above it (before any: the preamble)."""
    split = _Split()
    bodies = split.bodies
    current: str | None = None
    for i, line in enumerate(lines):
        h = headings.get(i)
        # A weak name pointing back (or at a section already seen) is prose.
        if (
            h is not None
            and h.key is not None
            and h.weak
            and current is not None
            and (h.key in bodies or _ORDER[h.key] <= _ORDER[current])
        ):
            h = None
        if h is not None and h.key is None:
            if h.level is not None and h.level <= section_level and current is not None:
                split.unknown.append(h.raw)
                split.problems.append(
                    TemplateProblem(
                        "unknown_heading",
                        f"line {i + 1}: unknown heading '{h.raw}', kept under "
                        f"{_BY_KEY[current].heading}",
                        section=current,
                        line=i + 1,
                    )
                )
            h = None
        if h is None:
            (bodies[current] if current is not None else split.preamble).append(line)
            continue
        key = h.key
        assert key is not None
        if key in bodies:
            split.duplicates.append(key)
            split.problems.append(
                TemplateProblem(
                    "duplicate",
                    f"line {i + 1}: {_BY_KEY[key].heading} appears again (first at line "
                    f"{split.first_line[key]}); its text was added to the first",
                    section=key,
                    line=i + 1,
                )
            )
            bodies[key].append("")
        else:
            bodies[key] = []
            split.first_line[key] = i + 1
        if h.inline:
            bodies[key].append(h.inline)
        current = key
    return split


def _title_from_preamble(split: _Split) -> str:
    """A short text before the first section is the title (when there is none); a longer
    one is reported and returned as the preamble."""
    pre = _strip_markup("\n".join(split.preamble)).strip()
    if not pre:
        return ""
    pre_lines = [ln for ln in pre.split("\n") if ln.strip()]
    short = word_count(pre) <= TITLE_MAX_WORDS and len(pre_lines) <= TITLE_MAX_LINES
    if short and "title" not in split.bodies:
        split.bodies["title"] = [" ".join(ln.strip() for ln in pre_lines)]
        split.first_line["title"] = 1
        return ""
    why = "is too long for a title" if not short else "comes before the Title"
    split.problems.append(
        TemplateProblem(
            "preamble",
            f"text before the first section ({word_count(pre)} words) {why}; "
            "move it into a section",
            line=1,
        )
    )
    return "\n".join(split.preamble).strip()


def _strip_markup(text: str) -> str:
    out = []
    for line in text.split("\n"):
        md = _MD_HEADING.match(line)
        if md:
            line = md.group(2)
        line = line.strip()
        m = _EMPHASIS.match(line)
        if m and not m.group(3).strip():
            line = m.group(2).strip()
        out.append(line)
    return "\n".join(out)


def render_sections(sections: Mapping[str, str], *, include_missing: bool = False) -> str:
    """The canonical Markdown form: ``## 1. Title`` … ``## 7. Fallback Plan``.

    Sections are written in template order whatever the mapping's order. With
    ``include_missing`` every heading is written, so an editor shows where text is
    still needed. Keys outside the template are an error rather than silently dropped.
    """
    unknown = [k for k in sections if k not in _BY_KEY]
    if unknown:
        raise ValueError(f"not template sections: {', '.join(unknown)}")
    parts = []
    for number, section in enumerate(SECTIONS, start=1):
        if section.key not in sections and not include_missing:
            continue
        body = (sections.get(section.key) or "").strip()
        parts.append(f"## {number}. {section.heading}\n\n{body}".rstrip())
    return "\n\n".join(parts) + "\n" if parts else ""
