"""Style normalization: the prompt we send, and the checks every rewrite must pass.

Si et al. had a model rewrite every idea into one house style and then checked each
rewrite by hand for changed content. We keep the person in the loop (the owner signs each
rewrite off) but first run the mechanical checks a careful reader would: every number,
name, URL and author-year citation of the original is still there, numeric citation
markers are gone, the seven sections are in place, and the length and meaning have not
drifted. A failed check does not reject a rewrite; it is put on top of the sign-off view.

Pure Python: no Django imports.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from studies.protocol.template import SECTIONS, heading_words, parse_sections

__all__ = [
    "NORMALIZATION_PROMPT",
    "NORMALIZATION_PROMPT_VERSION",
    "CheckBounds",
    "CheckResult",
    "check_rewrite",
    "clean_model_output",
    "extract_citations",
    "extract_names",
    "extract_numbers",
    "extract_urls",
    "find_citation_markers",
    "normalization_messages",
    "prompt_sha256",
    "word_diff",
]

NORMALIZATION_PROMPT_VERSION = "ideareview-normalize-v1"


def _section_list() -> str:
    return "\n".join(f"{i}. {s.heading}" for i, s in enumerate(SECTIONS, start=1))


NORMALIZATION_PROMPT = f"""\
You are a copy editor for a study in which experts review research proposals without \
knowing who wrote them. Your job is to make every proposal read as if one editor had \
typed it, while leaving its content exactly as it is.

You may change:
- wording, sentence structure and vocabulary, towards a plain, neutral academic register;
- formatting, punctuation, capitalisation, line breaks, bullets and indentation.

You must not change:
- any idea, claim, step, example, number, measurement or setting; add nothing and leave \
nothing out;
- the name of any model, dataset, benchmark, metric, method, tool or library: copy each \
one character for character (for example GPT-4, Llama-3-8B, XNLI, BLEU, \
Chain-of-Thought);
- URLs and author-year citations such as "Smith et al. (2023)" or "(Smith & Lee, 2021)".

Citations: delete numeric reference markers such as [1], [12] or [3,4,5]; keep every \
author-year citation.

Structure: use exactly these seven sections, in this order, each as a Markdown heading \
of the form "## <number>. <name>":
{_section_list()}
Put the text that belongs to each section under it. Number the steps of the experiment \
plan and the test cases consistently, use "-" for bullets and indent nested bullets by \
two spaces.

Reply with the rewritten proposal only: no preface, no comments, no code fence around it.
"""


_OUTER_FENCE = re.compile(r"\A\s*(```|~~~)[\w-]*[ \t]*\n(?P<body>.*)\n\s*\1\s*\Z", re.DOTALL)


def clean_model_output(text: str) -> str:
    """The rewrite without a code fence wrapped around all of it, which models add unasked."""
    m = _OUTER_FENCE.match(text)
    return (m.group("body") if m else text).strip()


def prompt_sha256(prompt: str = NORMALIZATION_PROMPT) -> str:
    """Hex digest stored with every result, so a changed prompt is never mistaken for v1."""
    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()


def normalization_messages(proposal: str, *, prompt: str = NORMALIZATION_PROMPT) -> list[dict]:
    """Chat messages for an OpenAI-compatible endpoint."""
    return [
        {"role": "system", "content": prompt},
        {"role": "user", "content": proposal},
    ]


# --- what must survive -------------------------------------------------------------------

_URL = re.compile(r"(?:https?://|www\.)[^\s<>\"'`\])}]+", re.IGNORECASE)
_CODE_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_INLINE_CODE = re.compile(r"`[^`\n]*`")
# A bracketed list of numbers right after a word or sentence punctuation: "as shown [3,4]."
# "x = [1, 2]" or "print([1])" have no word before the bracket and are left alone.
_MARKER = re.compile(r"(?<=[\w.,;)\"'\u201d])[ \t]*\[\s*\d{1,3}(?:\s*[,\u2013\-]\s*\d{1,3})*\s*\]")
_NUMBER = re.compile(
    r"(?<![\w.])(?P<num>[-+\u2212]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?)"
    r"(?P<pct>\s?(?:%|percent\b|per cent\b))?",
    re.IGNORECASE,
)
_LIST_NUMBERING = re.compile(r"^(\s*(?:#{1,6}\s*)?(?:\*\*)?)(?:\d+(?:\.\d+)*[.)]|\(\d+\))\s+")
_STEP_NUMBERING = re.compile(
    r"\b(?:step|section|test case|example|case)\s+\d+\b\s*[:.)]?", re.IGNORECASE
)
_SURNAME = r"[A-Z][A-Za-z\u00C0-\u024F'\u2019\-]+"
_AUTHORS = rf"(?P<first>{_SURNAME})(?:\s+et\s+al\.?|\s+(?:and|&)\s+{_SURNAME})?"
_YEAR = r"(?P<year>(?:19|20)\d{2}[a-z]?)"
_NARRATIVE_CITATION = re.compile(rf"{_AUTHORS}\s*\(\s*{_YEAR}\s*\)")
_PAREN_CITATION_ITEM = re.compile(rf"{_AUTHORS},?\s+{_YEAR}")
_PARENTHESES = re.compile(r"\(([^()]*)\)")
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9]*(?:[-.'/+][A-Za-z0-9]+)*\+*")

_SMALL_NUMBERS = {
    w: str(i)
    for i, w in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
            "twenty",
        ]
    )
}
_TEMPLATE_WORDS = heading_words() | {
    "by",
    "input",
    "output",
    "expected",
    "explanation",
    "baseline",
    "prompt",
    "step",
    "steps",
    "case",
    "example",
}


def _strip_code_fences(text: str) -> str:
    """Drop fence lines but keep what is inside: prompts in test cases carry names too."""
    return "\n".join(ln for ln in text.split("\n") if not _CODE_FENCE.match(ln))


def extract_urls(text: str) -> list[str]:
    out = []
    for m in _URL.finditer(text):
        url = m.group(0).rstrip(".,;:!?*_")
        out.append(url)
    return list(dict.fromkeys(out))


def _norm_url(url: str) -> str:
    url = url.lower()
    url = re.sub(r"^https?://", "", url)
    url = re.sub(r"^www\.", "", url)
    return url.rstrip("/")


def find_citation_markers(text: str) -> list[str]:
    """Numeric citation markers such as ``[3]`` or ``[3, 4, 5]`` outside code."""
    out: list[str] = []
    in_fence = False
    for line in text.split("\n"):
        if _CODE_FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        line = _INLINE_CODE.sub(" ", line)
        out.extend(m.group(0).strip() for m in _MARKER.finditer(line))
    return out


def _without(text: str, pattern: re.Pattern[str]) -> str:
    return pattern.sub(" ", text)


def extract_numbers(text: str) -> list[str]:
    """Numbers as comparable strings: ``1,000`` → ``1000``, ``5 %`` → ``5%``.

    List and step numbering is left out: the rewrite is asked to renumber sections, and a
    "Step 3" that became "3." is the same step.
    """
    text = _strip_code_fences(text)
    text = _without(text, _URL)
    text = _without(text, _MARKER)
    lines = [_LIST_NUMBERING.sub(r"\1", ln) for ln in text.split("\n")]
    text = _STEP_NUMBERING.sub(" ", "\n".join(lines))
    out = []
    for m in _NUMBER.finditer(text):
        num = m.group("num").replace(",", "").replace("\u2212", "-").lstrip("+")
        out.append(num + ("%" if m.group("pct") else ""))
    return list(dict.fromkeys(out))


def _number_forms(text: str) -> set[str]:
    found = set(extract_numbers(text))
    # A rewrite may spell small numbers out ("two datasets"); that is a style choice.
    for word in re.findall(r"[A-Za-z]+", text):
        if word.lower() in _SMALL_NUMBERS:
            found.add(_SMALL_NUMBERS[word.lower()])
    return found


def extract_citations(text: str) -> list[tuple[str, str]]:
    """Author-year citations as (first author's surname, year), in order of appearance."""
    found: list[tuple[int, str, str]] = []
    for m in _NARRATIVE_CITATION.finditer(text):
        found.append((m.start(), m.group("first"), m.group("year")))
    for paren in _PARENTHESES.finditer(text):
        offset = paren.start(1)
        for part in paren.group(1).split(";"):
            item = _PAREN_CITATION_ITEM.search(part)
            if item:
                found.append((offset + item.start(), item.group("first"), item.group("year")))
            offset += len(part) + 1
    return list(dict.fromkeys((first, year) for _, first, year in sorted(found)))


def _citation_key(c: tuple[str, str]) -> tuple[str, str]:
    return c[0].lower().replace("\u2019", "'"), c[1].lower()


def _is_name(token: str, sentence_start: bool, label: bool = False) -> bool:
    letters = re.sub(r"[^A-Za-z]", "", token)
    if not letters:
        return False  # a plain number: the numbers check owns it
    has_digit = any(ch.isdigit() for ch in token)
    if has_digit and any(ch.isalpha() for ch in token):
        return True  # GPT-4, Llama-3-8B, T5, mT5
    if len(letters) >= 2 and sum(ch.isupper() for ch in letters) >= 2:
        return True  # BLEU, XNLI, HotpotQA, RoBERTa, Chain-of-Verification
    if any(ch.isupper() for ch in letters[1:]):
        return True  # iPhone, mBERT
    if token[0].isupper() and len(letters) > 1:
        if sentence_start or label:
            return False  # "However" starting a sentence; "Gather Datasets:" as a label
        return token.lower() not in _TEMPLATE_WORDS
    return False


_SENTENCE_END = re.compile(r"(?:[.!?:;]|[\"'\u201c\u2018(\[*_>|#-])\s*$")


# The rest of a title-case label: "Prompts:" in "Step 2: Construct Prompts: ...".
_LABEL_TAIL = re.compile(r"(?:\s+[A-Z][a-z]+)*\s*:")


def extract_names(text: str) -> list[str]:
    """Model, dataset and method names: capitalised, CamelCase, acronym and digit tokens.

    Capitalised ordinary words are skipped where a sentence, list item or heading starts,
    and words of the template's own headings are skipped everywhere.
    """
    text = _strip_code_fences(text)
    text = _without(text, _URL)
    text = _without(text, _MARKER)
    out: list[str] = []
    for raw_line in text.split("\n"):
        line = _LIST_NUMBERING.sub(r"\1", raw_line)
        line = re.sub(r"^\s*(?:[-*+]\s+|#{1,6}\s*)", "", line)
        parsed_heading = _is_heading_line(line)
        prev_end = 0
        for m in _TOKEN.finditer(line):
            token = re.sub(r"(?:'s|\u2019s)$", "", m.group(0)).rstrip(".'")
            # Only the gap since the previous token decides (keeps long lines linear).
            gap = line[prev_end : m.start()]
            at_line_start = prev_end == 0 and not gap.strip()
            start = parsed_heading or at_line_start or bool(_SENTENCE_END.search(gap))
            prev_end = m.end()
            label = bool(_LABEL_TAIL.match(line[m.end() : m.end() + 80]))
            if _is_name(token, start, label):
                if all(part in _TEMPLATE_WORDS for part in token.lower().split("-")):
                    continue  # "Step-by-Step", "Test-Case": the template's own words
                out.append(token)
    return list(dict.fromkeys(out))


def _is_heading_line(line: str) -> bool:
    """Headings are written in title case: none of their capitals mark a name."""
    stripped = line.strip().strip("*_#: ")
    if not stripped:
        return False
    words = re.findall(r"[A-Za-z][\w-]*", stripped)
    if not words or len(words) > 12:
        return False
    caps = sum(w[0].isupper() for w in words)
    small = {"a", "an", "and", "of", "the", "for", "to", "in", "on", "with", "by", "via", "or"}
    return all(w[0].isupper() or w.lower() in small for w in words) and caps >= 1


def _contains(haystack: str, needle: str) -> bool:
    # "GPT-4" is not kept by "GPT-4o" or "GPT-4.5", nor "Llama-3" by "Llama-3-8B".
    pattern = r"(?<![A-Za-z0-9])" + re.escape(needle.lower()) + r"(?![A-Za-z0-9]|[-.][A-Za-z0-9])"
    return re.search(pattern, haystack) is not None


# --- the checks ----------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckBounds:
    length_ratio: tuple[float, float] = (0.8, 1.25)
    min_similarity: float = 0.9


@dataclass(frozen=True)
class CheckResult:
    """One check on a rewrite. ``lost`` lists what went missing, for highlighting."""

    name: str
    passed: bool
    detail: str
    lost: tuple[str, ...] = ()


def _listed(label: str, items: Sequence[str], limit: int = 12) -> str:
    shown = ", ".join(items[:limit])
    more = f" and {len(items) - limit} more" if len(items) > limit else ""
    return f"{label}: {shown}{more}"


def _check_numbers(original: str, rewritten: str) -> CheckResult:
    kept = _number_forms(rewritten)
    lost = [n for n in extract_numbers(original) if n not in kept]
    total = len(extract_numbers(original))
    if lost:
        return CheckResult("numbers", False, _listed("missing numbers", lost), tuple(lost))
    return CheckResult("numbers", True, f"all {total} numbers kept")


def _check_names(original: str, rewritten: str) -> CheckResult:
    names = extract_names(original)
    hay = _without(_strip_code_fences(rewritten), _MARKER).lower()
    lost = [n for n in names if not _contains(hay, n)]
    if lost:
        return CheckResult("names", False, _listed("missing names", lost), tuple(lost))
    return CheckResult("names", True, f"all {len(names)} names kept")


def _check_urls(original: str, rewritten: str) -> CheckResult:
    urls = extract_urls(original)
    kept = {_norm_url(u) for u in extract_urls(rewritten)}
    lost = [u for u in urls if _norm_url(u) not in kept]
    if lost:
        return CheckResult("urls", False, _listed("missing URLs", lost), tuple(lost))
    return CheckResult("urls", True, f"all {len(urls)} URLs kept")


def _check_citations(original: str, rewritten: str) -> CheckResult:
    cites = extract_citations(original)
    kept = {_citation_key(c) for c in extract_citations(rewritten)}
    lost = [f"{a} ({y})" for a, y in cites if _citation_key((a, y)) not in kept]
    if lost:
        return CheckResult("citations", False, _listed("missing citations", lost), tuple(lost))
    return CheckResult("citations", True, f"all {len(cites)} author-year citations kept")


def _check_markers(rewritten: str) -> CheckResult:
    markers = find_citation_markers(rewritten)
    if markers:
        items = list(dict.fromkeys(markers))
        return CheckResult(
            "citation_markers", False, _listed("numeric citation markers left", items)
        )
    return CheckResult("citation_markers", True, "no numeric citation markers")


def _check_sections(rewritten: str) -> CheckResult:
    parsed = parse_sections(rewritten)
    if parsed.is_clean:
        return CheckResult("sections", True, "all seven sections, in template form")
    headings = {s.key: s.heading for s in SECTIONS}
    parts = []
    if parsed.missing:
        parts.append(_listed("missing sections", [headings[k] for k in parsed.missing]))
    if parsed.empty:
        parts.append(_listed("empty sections", [headings[k] for k in parsed.empty]))
    if parsed.duplicates:
        parts.append(_listed("repeated sections", [headings[k] for k in parsed.duplicates]))
    if parsed.unknown_headings:
        parts.append(_listed("unknown headings", list(parsed.unknown_headings)))
    if parsed.preamble:
        parts.append("text before the first section")
    lost = tuple(headings[k] for k in parsed.missing)
    return CheckResult("sections", False, "; ".join(parts), lost)


def _words(text: str) -> int:
    return len(re.findall(r"\S+", text))


def _check_length(original: str, rewritten: str, bounds: CheckBounds) -> CheckResult:
    lo, hi = bounds.length_ratio
    n_orig, n_new = _words(original), _words(rewritten)
    ratio = n_new / n_orig if n_orig else (1.0 if not n_new else float("inf"))
    detail = f"{n_new} words for {n_orig}: ratio {ratio:.2f} (bounds {lo:.2f}\u2013{hi:.2f})"
    return CheckResult("length", lo <= ratio <= hi, detail)


def _check_similarity(
    original: str, rewritten: str, embed: Callable[[Sequence[str]], np.ndarray], bound: float
) -> CheckResult:
    vecs = np.asarray(embed([original, rewritten]), dtype=np.float64)
    a, b = vecs[0], vecs[1]
    denom = float(np.linalg.norm(a) * np.linalg.norm(b))
    sim = float(a @ b / denom) if denom else 0.0
    return CheckResult(
        "similarity", sim >= bound, f"embedding cosine {sim:.3f} (bound {bound:.2f})"
    )


def check_rewrite(
    original: str,
    rewritten: str,
    *,
    embed: Callable[[Sequence[str]], np.ndarray] | None = None,
    bounds: CheckBounds | None = None,
) -> list[CheckResult]:
    """Run every check on a rewrite; failed ones carry what was lost in ``detail``.

    Checks, in display order: numbers, names, urls, citations, citation_markers,
    sections, length, and similarity (only with ``embed``, a function from a list of
    texts to one vector per text).
    """
    bounds = bounds or CheckBounds()
    results = [
        _check_numbers(original, rewritten),
        _check_names(original, rewritten),
        _check_urls(original, rewritten),
        _check_citations(original, rewritten),
        _check_markers(rewritten),
        _check_sections(rewritten),
        _check_length(original, rewritten, bounds),
    ]
    if embed is not None:
        results.append(_check_similarity(original, rewritten, embed, bounds.min_similarity))
    return results


# --- the diff ----------------------------------------------------------------------------

_WORD_WITH_SPACE = re.compile(r"\S+\s*|\s+")


def word_diff(a: str, b: str) -> list[tuple[str, str]]:
    """Word-level diff from ``a`` to ``b`` as (op, text) runs, op in equal/delete/insert.

    Words are compared without their trailing whitespace, so re-flowed lines are not
    changes. Joining the ``equal`` and ``insert`` runs gives ``b`` exactly; joining the
    ``equal`` and ``delete`` runs gives ``a`` up to whitespace.
    """
    ta = _WORD_WITH_SPACE.findall(a)
    tb = _WORD_WITH_SPACE.findall(b)
    ka = [t.strip() for t in ta]
    kb = [t.strip() for t in tb]
    ops: list[tuple[str, str]] = []

    def push(op: str, text: str) -> None:
        if not text:
            return
        if ops and ops[-1][0] == op:
            ops[-1] = (op, ops[-1][1] + text)
        else:
            ops.append((op, text))

    matcher = difflib.SequenceMatcher(None, ka, kb, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            push("equal", "".join(tb[j1:j2]))
        else:
            if tag in ("delete", "replace"):
                push("delete", "".join(ta[i1:i2]))
            if tag in ("insert", "replace"):
                push("insert", "".join(tb[j1:j2]))
    return ops
