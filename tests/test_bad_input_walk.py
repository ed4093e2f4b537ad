"""Every endpoint that accepts a file or JSON, walked with a corpus of bad inputs: each
answer is a 4xx with a message, never a 5xx, and nothing is written.

The endpoints are found from the URLconf: a view takes a file or JSON when its source (or
a helper of its module it calls) reads request.FILES, request.body or JSON, or names a
form with a FileField or a JSON field. A new such view fails
`test_the_walk_covers_every_endpoint_that_takes_a_file_or_json` until it is added to
WALK. Run on PostgreSQL too (CI's second pass), which refuses NUL in text.
"""

from __future__ import annotations

import inspect
import io
import re
import zipfile
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django import forms
from django.apps import apps
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from tests.factories import review_study

# --------------------------------------------------------------------------- the corpus

DEEP = "[" * 50_000 + "]" * 50_000


def _bomb() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for i in range(20):
            z.writestr(f"{i}.md", b"---\nid: x\n---\n" + b"a" * 1_900_000)
    return buffer.getvalue()


JSON_TEXTS = {
    "deep nesting": DEEP,
    "NUL": '{"a": "x\\u0000y", "b\\u0000": 1}',
    "wrong type (list)": "[1, 2, 3]",
    "wrong type (string)": '"text"',
    "wrong types inside": '{"temperature": "hot", "rounds": {"a": []}, "min_pair": null}',
    "not JSON": "{'single': quotes}",
    "huge field": '{"x": "' + "a" * 3_000_000 + '"}',
}

FILES: dict[str, tuple[str, bytes]] = {
    "deep JSON": ("bad.json", DEEP.encode()),
    "deep JSONL": ("bad.jsonl", (DEEP + "\n").encode()),
    "NUL in CSV": ("bad.csv", b"name,email,id,text\nA\x00B,a@example.org,x\x00,t\x00\n"),
    "NUL in JSONL": ("bad.jsonl", b'{"name": "A\\u0000B", "email": "a@example.org"}\n'),
    "invalid UTF-8 CSV": ("bad.csv", b"name,email\n\xff\xfe\xfa,\xc3\x28@example.org\n"),
    "invalid UTF-8 JSON": ("bad.json", b'{"a": "\xff\xfe"}'),
    "huge CSV field": ("bad.csv", b"name,email\n" + b"x" * 200_000 + b",a@example.org\n"),
    "wrong types JSON": ("bad.json", b'{"reviews": 3, "papers": "none", "a": [null, {}]}'),
    "wrong types JSONL": ("bad.jsonl", b"[1,2]\n3\n"),
    "zip bomb": ("bad.zip", _bomb()),
    "not a zip": ("bad.zip", b"PK\x03\x04 broken"),
    "empty": ("bad.csv", b""),
}


def _file(name: str, data: bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data, content_type="application/octet-stream")


# --------------------------------------------------------------------------- the walk

Post = Callable[[Client, str], Iterator[tuple[str, Any]]]


def _files(field: str, extra: dict[str, str], url: str, client: Client):
    for label, (name, data) in FILES.items():
        yield label, client.post(url, {**extra, field: _file(name, data)})


def _texts(field: str, extra: dict[str, str], url: str, client: Client):
    for label, text in JSON_TEXTS.items():
        yield label, client.post(url, {**extra, field: text})


def _judge_form(**over: str) -> dict[str, str]:
    return {
        "name": "walk",
        "provider": "",
        "base_url": "http://127.0.0.1:9/v1",
        "model": "m",
        "parameters": "{}",
        "price_input_per_million": "0",
        "price_output_per_million": "0",
        "concurrency": "1",
        "timeout_seconds": "5",
        "max_attempts": "1",
        "backoff_seconds": "0",
        **over,
    }


def walk_study_import(client: Client, url: str):
    yield from _files("reviews", {"format": "generic"}, url, client)
    yield from _files("reviews", {"format": "si2024"}, url, client)
    ok = _file("r.csv", b"idea_id,novelty\nx,1\n")
    for label, text in JSON_TEXTS.items():
        yield (
            f"mapping {label}",
            client.post(url, {"format": "generic", "reviews": ok, "mapping": text}),
        )


def walk_ideas_import(client: Client, url: str):
    yield from _files("file", {"form": "upload"}, url, client)
    for name in ("bad.md", "bad.jsonl", "bad.csv"):
        data = b"---\nid: x\n---\n" + b"a\x00" * 10
        yield f"NUL in {name}", client.post(url, {"form": "upload", "file": _file(name, data)})


def walk_study_form(client: Client, url: str):
    yield from _files("file", {"source": "upload", "intent": "use"}, url, client)
    yield from _texts("definition", {"source": "edit", "intent": "use"}, url, client)


def walk_ideas_gold(client: Client, url: str):
    from studies.models import Idea

    idea = Idea.objects.filter(study__slug=url.split("/")[2]).first()
    assert idea is not None
    yield from _texts("ranges", {"idea": str(idea.pk)}, url, client)


WALK: dict[str, Post | str] = {
    "studies:reviews_import_page": walk_study_import,
    "studies:invitations_upload": lambda c, u: _files("file", {}, u, c),
    "studies:study_invitations": "shows the upload form; its file goes to invitations_upload",
    "studies:study_plan": lambda c, u: _texts("document", {}, u, c),
    "studies:pair_tasks_upload": lambda c, u: _files("file", {}, u, c),
    "studies:pair_tasks": "shows the upload form; its file goes to pair_tasks_upload",
    "studies:ideas_import": walk_ideas_import,
    "studies:ideas_gold": walk_ideas_gold,
    "studies:study_form": walk_study_form,
    "judging:config_create": lambda c, u: _texts("parameters", _judge_form(), u, c),
    "judging:key_create": lambda c, u: _texts("secret", {"label": "x\x00"}, u, c),
    "judging:run_create": lambda c, u: _texts("params", {"method": "baseline_random"}, u, c),
    "judging:corpora": lambda c, u: _files("file", {"name": "walk"}, u, c),
}
"""Each endpoint and how the corpus is posted to it."""

NOT_WALKED = {
    "admin": "Django's admin, for superusers only: every JSON field of its pages reads "
    "through the depth-limited reader, checked model by model in tests/test_admin_json.py",
}


def _patterns(patterns: list[Any], ns: str = "") -> Iterator[tuple[str, Any]]:
    for p in patterns:
        if isinstance(p, URLResolver):
            inner = f"{ns}:{p.namespace}" if ns and p.namespace else (p.namespace or ns)
            yield from _patterns(p.url_patterns, inner)
        elif isinstance(p, URLPattern) and p.name:
            yield (f"{ns}:{p.name}" if ns else p.name), p.callback


def _source_with_helpers(fn: Any) -> str:
    """The view's source and that of the module's functions it calls, transitively."""
    module = inspect.getmodule(fn)
    seen: set[str] = set()
    todo, parts = [fn], []
    while todo:
        f = todo.pop()
        try:
            src = inspect.getsource(f)
        except (OSError, TypeError):
            continue
        parts.append(src)
        for name in re.findall(r"\b(_?[a-z]\w*)\(", src):
            g = getattr(module, name, None)
            if name not in seen and inspect.isfunction(g) and g.__module__ == fn.__module__:
                seen.add(name)
                todo.append(g)
    return "\n".join(parts)


def _takes_file_or_json(view: Any) -> bool:
    fn = inspect.unwrap(view)
    src = _source_with_helpers(fn)
    if any(m in src for m in ("request.FILES", "request.body", "jsonsafe", "json.loads")):
        return True
    for name in set(re.findall(r"\b([A-Z]\w*Form)\b", src)):
        cls = fn.__globals__.get(name)
        if isinstance(cls, type) and issubclass(cls, forms.BaseForm):
            if any(isinstance(f, forms.FileField) for f in cls.base_fields.values()):
                return True
            if "json" in inspect.getsource(cls).lower():
                return True
    return False


def test_the_walk_covers_every_endpoint_that_takes_a_file_or_json():
    found = {
        name
        for name, view in _patterns(get_resolver().url_patterns)
        if _takes_file_or_json(view) and name.split(":")[0] not in NOT_WALKED
    }
    assert found - set(WALK) == set(), "add these endpoints to WALK"
    assert set(WALK) - found == set(), "WALK names endpoints that take no file or JSON"


def _rows() -> dict[str, int]:
    counted = {}
    for label in ("studies", "judging", "llm", "auth"):
        for model in apps.get_app_config(label).get_models():
            counted[model._meta.label] = model._default_manager.count()
    return counted


KEPT = {"studies.IdeaUpload"}
"""A refused upload is kept for "import the valid rows" (deleted when taken, expiring);
it holds no rows of the file."""


def _message(response: Any) -> str:
    body = response.content.decode("utf-8", errors="replace")
    if response.status_code == 413 and "Too large to accept" in body:
        return "Too large to accept"
    found = re.findall(
        r'<(ul|li|p|div|span|section)[^>]*(?:class="[^"]*(?:errorlist|error|problem|messages)'
        r'[^"]*"|role="alert")[^>]*>(.*?)</\1>',
        body,
        flags=re.S,
    )
    return " ".join(re.sub(r"<[^>]+>", " ", f) for _, f in found).strip()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("name", sorted(WALK))
def test_every_bad_input_gets_a_4xx_with_a_message_and_writes_nothing(name, owner):
    built = review_study(owner, n_reviewers=2, n_ideas=2, per_reviewer=1)
    client = Client(raise_request_exception=False)
    client.force_login(owner)
    before = _rows()
    post = WALK[name]
    if isinstance(post, str):
        pytest.skip(post)
    answers = list(post(client, reverse(name, args=[built.study.slug])))
    bad = [
        (label, r.status_code, _message(r)[:200])
        for label, r in answers
        if not (400 <= r.status_code < 500 and _message(r))
    ]
    assert bad == []
    after = _rows()
    changed = {k: (before[k], after[k]) for k in before if before[k] != after[k] and k not in KEPT}
    assert changed == {}
