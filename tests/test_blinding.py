"""Blinding: crawl everything a reviewer can reach and look for what must stay hidden.

For every reviewer of a seeded study (with reviews in every state and pair tasks), the
crawler starts at the dashboard, follows every link, htmx URL and form on the pages it
finds (forms are posted empty and with partial answers, so error pages are covered too),
and fails if any response body, header or URL contains a condition key or label, an
author institution, an external idea id or an imported title; or if any URL names an
idea rather than an assignment, pair task, reviewer profile or signed token.
"""

from __future__ import annotations

import re
from collections import deque
from urllib.parse import urlsplit

import pytest
from django.urls import resolve

from studies.models import Assignment, Idea
from studies.services.reviews import pair_tasks_create, review_draft_save, review_submit
from tests.factories import cleaned, make_review_study

URL_ATTRS = re.compile(r'(?:href|hx-get|hx-post|action|formaction)="([^"]+)"')
ALLOWED_KWARGS = {"assignment_id", "task_id", "reviewer_id", "token"}


def leaks(text: str, secrets: list[str]) -> list[str]:
    low = text.lower()
    return [s for s in secrets if s.lower() in low]


def crawl(client, start: str, secrets: list[str], own: tuple[str, ...] = ()) -> dict[str, int]:
    """Every reviewer page reachable from `start`; none may show a secret. `own` is what
    the reviewer typed about themselves (their institution), which their own profile page
    shows back to them and no other page may show."""
    seen: dict[str, int] = {}
    queue = deque([("get", start, {})])
    while queue:
        method, url, data = queue.popleft()
        key = f"{method} {url} {sorted(data.items())}"
        if key in seen:
            continue
        path = urlsplit(url).path
        assert not leaks(url, secrets), f"URL {url} leaks {leaks(url, secrets)}"
        match = resolve(path)
        assert set(match.kwargs) <= ALLOWED_KWARGS, f"{url} names {set(match.kwargs)}"
        headers = {"HX-Request": "true"} if data.get("_htmx") else {}
        body = {k: v for k, v in data.items() if k != "_htmx"}
        response = client.post(url, body, headers=headers) if method == "post" else client.get(url)
        seen[key] = response.status_code
        assert response.status_code < 500, f"{method} {url} -> {response.status_code}"
        content = response.content.decode(errors="replace")
        hidden = (
            [x for x in secrets if x not in own]
            if path.startswith("/studies/r/profile/")
            else secrets
        )
        found = leaks(content, hidden) + leaks(str(dict(response.headers)), secrets)
        assert not found, f"{method} {url} leaks {found}"
        if response.status_code in (301, 302) and method == "post":
            queue.append(("get", response["Location"], {}))
        for link in URL_ATTRS.findall(content):
            link = link.replace("&amp;", "&")
            parts = urlsplit(link)
            if parts.netloc or not parts.path.startswith("/studies/r/"):
                continue  # other sites, static files, the researcher side
            if link.startswith("/studies/r/login"):
                queue.append(("get", link, {}))
            elif link.endswith("/submit/"):
                queue.append(("post", link, {}))
                queue.append(
                    ("post", link, {"novelty": "5", "overall": "tie", "novelty_rationale": "x"})
                )
            elif link.endswith("/draft/"):
                queue.append(("post", link, {"novelty": "3", "_htmx": "1"}))
            else:
                queue.append(("get", link, {}))
    return seen


@pytest.mark.django_db
def test_no_reviewer_page_reveals_condition_author_institution_or_idea_id(client, owner):
    seeded = make_review_study(owner)
    study = seeded.study
    pair_tasks_create(study=study, per_reviewer=2, seed=5)
    # Reviews in every state: one submitted and one draft for some reviewers.
    for k, rev in enumerate(seeded.reviewers):
        mine = list(Assignment.objects.filter(reviewer=rev).order_by("pk"))
        if k % 2 == 0:
            review_submit(assignment=mine[0], cleaned=cleaned(study))
        review_draft_save(assignment=mine[1], draft={"novelty": "4", "novelty_rationale": "draft"})
    secrets = list(seeded.secrets)
    assert "Quillfeather Institute" in secrets and any(s.startswith("XID-") for s in secrets)
    visited = 0
    for user, reviewer in zip(seeded.users, seeded.reviewers, strict=True):
        client.force_login(user)
        seen = crawl(client, "/studies/r/home/", secrets, own=(reviewer.institution,))
        assert any(k.startswith("get /studies/r/profile/") for k in seen), seen
        pages = [k for k in seen if k.startswith("get /studies/r/assignments/")]
        pairs = [k for k in seen if k.startswith("get /studies/r/pairs/")]
        assert len(pages) >= 3 and len(pairs) >= 1, seen
        visited += len(seen)
        client.logout()
    assert visited > 60


@pytest.mark.django_db
def test_dashboard_order_does_not_follow_import_order(client, owner):
    seeded = make_review_study(owner)
    orders = []
    for rev in seeded.reviewers:
        orders.append(
            list(
                Assignment.objects.filter(reviewer=rev)
                .order_by("pk")
                .values_list("idea_id", flat=True)
            )
        )
    assert any(order != sorted(order) for order in orders)
    # Assignment ids are not idea ids shifted by a constant either.
    offsets = {a.pk - a.idea_id for a in Assignment.objects.filter(study=seeded.study)}
    assert len(offsets) > 1


@pytest.mark.django_db
def test_reviewer_pages_never_carry_an_idea_primary_key_or_public_id(client, owner):
    seeded = make_review_study(owner)
    client.force_login(seeded.users[0])
    a = Assignment.objects.filter(reviewer=seeded.reviewers[0]).first()
    page = client.get(f"/studies/r/assignments/{a.pk}/").content.decode()
    idea = Idea.objects.get(pk=a.idea_id)
    assert str(idea.public_id) not in page
    assert f"/{idea.pk}/" not in page.replace(f"/{a.pk}/", "/")


@pytest.mark.django_db
def test_generating_model_is_shown_to_the_team_only(client, owner, tmp_path):
    """A condition's generating model names the condition's source as plainly as its key:
    no reviewer page and nothing in the de-identified package may carry it, while the
    team's study page shows it."""
    import zipfile

    from studies.package import package_build
    from studies.services import condition_set_generating_model

    seeded = make_review_study(owner, slug="genmodel")
    study = seeded.study
    pair_tasks_create(study=study, per_reviewer=2, seed=5)
    models = {"AI_Ideas": "zephyrquill-7b-instruct", "AI_Rerank": "gpt-4o-mini-rerankpass"}
    for key, model in models.items():
        condition_set_generating_model(study=study, key=key, model=model, actor=owner)
    secrets = [*seeded.secrets, *models.values()]
    client.force_login(owner)
    page = client.get(f"/studies/{study.slug}/").content.decode()
    assert all(m in page for m in models.values())
    client.logout()
    for user, reviewer in list(zip(seeded.users, seeded.reviewers, strict=True))[:2]:
        client.force_login(user)
        crawl(client, "/studies/r/home/", secrets, own=(reviewer.institution,))
        client.logout()
    out = tmp_path / "package.zip"
    package_build(study=study, out=out, use_report=False)
    with zipfile.ZipFile(out) as z:
        for name in z.namelist():
            body = z.read(name).decode(errors="replace")
            assert not leaks(body, list(models.values())), name
