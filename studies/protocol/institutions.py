"""Institution names reduced to comparable keys, for conflict-of-interest checks.

Reviewers type their institution freely ("Stanford", "Stanford University",
"stanford univ.") and sometimes leave it blank while signing up with a
``cs.stanford.edu`` address. The assignment must never send a reviewer an idea written at
their own institution, so every spelling has to land on one key. The rules are
deliberately conservative: a false match only removes a possible pairing, while a missed
match leaks an idea to a colleague of its author.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable

# Words that carry no identity in an institution's name. Dropping them makes
# "The University of Maryland" and "Maryland University" meet; aliases handle the rest.
_FILLER_WORDS = frozenset(
    {
        "the",
        "university",
        "universite",
        "universitat",
        "universita",
        "universidad",
        "universidade",
        "of",
        "at",
        "in",
        "de",
        "inc",
        "ltd",
        "llc",
        "corp",
    }
)

_ABBREVIATIONS = {
    "univ": "university",
    "uni": "university",
    "u": "university",
    "inst": "institute",
    "tech": "technology",
    "natl": "national",
    "dept": "department",
    "&": "and",
}

# Normalised spelling -> canonical key. Keys on the left are compared after
# `_basic_form`, so write them lowercase without filler words.
ALIASES: dict[str, str] = {
    "stanford": "stanford",
    "leland stanford junior": "stanford",
    "mit": "mit",
    "massachusetts institute technology": "mit",
    "csail": "mit",
    "uc berkeley": "berkeley",
    "ucb": "berkeley",
    "berkeley": "berkeley",
    "california berkeley": "berkeley",
    "ut austin": "ut austin",
    "utexas": "ut austin",
    "texas austin": "ut austin",
    "umd": "umd",
    "maryland": "umd",
    "maryland college park": "umd",
    "princeton": "princeton",
    "cmu": "cmu",
    "carnegie mellon": "cmu",
    "uw": "uw",
    "washington": "uw",
    "washington seattle": "uw",
    "ucla": "ucla",
    "california los angeles": "ucla",
    "ucsd": "ucsd",
    "california san diego": "ucsd",
    "ucsb": "ucsb",
    "california santa barbara": "ucsb",
    "caltech": "caltech",
    "california institute technology": "caltech",
    "harvard": "harvard",
    "yale": "yale",
    "columbia": "columbia",
    "nyu": "nyu",
    "new york": "nyu",
    "upenn": "upenn",
    "penn": "upenn",
    "pennsylvania": "upenn",
    "uiuc": "uiuc",
    "illinois": "uiuc",
    "illinois urbana champaign": "uiuc",
    "illinois urbanachampaign": "uiuc",
    "gatech": "gatech",
    "georgia tech": "gatech",
    "georgia institute technology": "gatech",
    "jhu": "jhu",
    "johns hopkins": "jhu",
    "umich": "umich",
    "michigan": "umich",
    "michigan ann arbor": "umich",
    "oxford": "oxford",
    "ox": "oxford",
    "cambridge": "cambridge",
    "cam": "cambridge",
    "eth": "eth zurich",
    "ethz": "eth zurich",
    "eth zurich": "eth zurich",
    "google": "google",
    "google deepmind": "google",
    "deepmind": "google",
    "google research": "google",
    "meta": "meta",
    "facebook": "meta",
    "fb": "meta",
    "meta ai": "meta",
    "fair": "meta",
    "microsoft": "microsoft",
    "microsoft research": "microsoft",
    "msr": "microsoft",
    "allen institute for ai": "ai2",
    "allen institute ai": "ai2",
    "allenai": "ai2",
    "ai2": "ai2",
}

# Email domains that say nothing about the holder's institution.
WEBMAIL_DOMAINS = frozenset(
    {
        "gmail.com",
        "googlemail.com",
        "outlook.com",
        "hotmail.com",
        "live.com",
        "yahoo.com",
        "icloud.com",
        "me.com",
        "proton.me",
        "protonmail.com",
        "qq.com",
        "163.com",
        "126.com",
        "foxmail.com",
        "aol.com",
        "mail.com",
        "gmx.de",
        "gmx.net",
        "yandex.ru",
    }
)

# Registrable domain -> canonical key, for domains whose first label is not a usable name.
DOMAIN_ALIASES: dict[str, str] = {
    "utexas.edu": "ut austin",
    "umd.edu": "umd",
    "uw.edu": "uw",
    "washington.edu": "uw",
    "upenn.edu": "upenn",
    "illinois.edu": "uiuc",
    "gatech.edu": "gatech",
    "jhu.edu": "jhu",
    "umich.edu": "umich",
    "ox.ac.uk": "oxford",
    "cam.ac.uk": "cambridge",
    "ethz.ch": "eth zurich",
    "allenai.org": "ai2",
    "fb.com": "meta",
    "deepmind.com": "google",
}

# Second-level suffixes under which the institution is the third label from the right
# (cs.ox.ac.uk -> ox).
_TWO_PART_SUFFIXES = frozenset(
    {"ac.uk", "ac.jp", "edu.cn", "edu.au", "ac.kr", "edu.sg", "ac.il", "edu.hk", "ac.in"}
)


def register_alias(spelling: str, canonical: str) -> None:
    """Teach the normaliser that `spelling` means `canonical` (both free text)."""
    ALIASES[_basic_form(spelling)] = _basic_form(canonical) or canonical.strip().lower()


@functools.lru_cache(maxsize=65536)
def _basic_form(name: str) -> str:
    # Cached: an assignment normalises every reviewer's and idea's institution, and the
    # same few hundred spellings recur thousands of times (the result depends on the
    # name alone; aliases are looked up after it).
    text = unicodedata.normalize("NFKD", name)
    text = "".join(ch for ch in text if not unicodedata.combining(ch)).lower()
    text = text.replace("&", " and ")
    # Dots and hyphens inside abbreviations ("U.C.", "Urbana-Champaign") join letters,
    # other punctuation separates words.
    text = re.sub(r"(?<=\b\w)\.(?=\w\b)", "", text)
    text = re.sub(r"[^\w\s]", " ", text)
    words = [_ABBREVIATIONS.get(w, w) for w in text.split()]
    return " ".join(w for w in words if w not in _FILLER_WORDS)


def normalize_institution(name: str | None) -> str:
    """Comparable key for an institution name; "" when nothing usable is given."""
    if not name or not name.strip():
        return ""
    if "@" in name and " " not in name.strip():
        return institution_from_email(name) or ""
    basic = _basic_form(name)
    if basic in ALIASES:
        return ALIASES[basic]
    # "Stanford University, Dept. of Computer Science": a comma-separated part may name
    # the institution. Prefixes of a single part are not tried: "Washington University
    # in St. Louis" is not the University of Washington.
    for part in name.split(","):
        part_form = _basic_form(part)
        if part_form in ALIASES:
            return ALIASES[part_form]
    return basic


def institution_from_email(email: str | None) -> str | None:
    """Institution key from an address such as ``jane@cs.stanford.edu``; None for webmail."""
    if not email or "@" not in email:
        return None
    domain = email.rsplit("@", 1)[1].strip().lower().rstrip(".")
    labels = [label for label in domain.split(".") if label]
    if len(labels) < 2:
        return None
    if domain in WEBMAIL_DOMAINS or ".".join(labels[-2:]) in WEBMAIL_DOMAINS:
        return None
    suffix2 = ".".join(labels[-2:])
    if suffix2 in _TWO_PART_SUFFIXES and len(labels) >= 3:
        registrable = ".".join(labels[-3:])
        name = labels[-3]
    else:
        registrable = suffix2
        name = labels[-2]
    if registrable in DOMAIN_ALIASES:
        return DOMAIN_ALIASES[registrable]
    return normalize_institution(name)


def institution_keys(
    institutions: Iterable[str | None] = (), emails: Iterable[str | None] = ()
) -> frozenset[str]:
    """All keys a person or an idea's author list belongs to (blank ones dropped)."""
    keys = {normalize_institution(name) for name in institutions}
    keys.update(institution_from_email(email) or "" for email in emails)
    keys.discard("")
    return frozenset(keys)


def same_institution(a: str | None, b: str | None) -> bool:
    """True when two institution names (or email addresses) denote the same place."""
    key_a, key_b = normalize_institution(a), normalize_institution(b)
    return bool(key_a) and key_a == key_b
