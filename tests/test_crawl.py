"""No page answers 5xx: crawl the site as each persona in every state of a study.

Each persona starts at the landing page (`/`; a reviewer also at the reviewer dashboard,
where logging in sends them) and follows every same-site `href` and `hx-get` it finds
(GET only; `hx-get` URLs both plain and as htmx requests; never the logout). The study is
built state by state with the services the web uses, for an idea-intake study (created,
ideas in, normalizing, open, reviewing, closed, reported) and a review-import study
(created, reviews imported, reported). Every crawl must reach a minimum number of pages,
so a crawl that stops at a login page or a broken link cannot pass. Every page a
reviewer reaches is also searched for what blinding hides: condition keys and labels,
author institutions and external idea ids; and every HTML page for what a strict
Content-Security-Policy refuses (inline styles, handlers and scripts) and for form
controls without a label. Every action a team member's pages offer (a form posting, an
`hx-post`, a `formaction`) is sent once as that member, inside a transaction rolled back
afterwards: a page must not offer an action the member's role is refused (403).
"""

from __future__ import annotations

import io
import re
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from html import unescape
from typing import Any
from urllib.parse import urljoin, urlsplit

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import caches
from django.core.cache.backends.locmem import LocMemCache
from django.core.management import call_command
from django.db import transaction
from django.test import Client
from django.urls import Resolver404, resolve

from judging.services import judge_config_create, judge_run_create, judge_run_execute
from studies import services
from studies.analysis.report import ReportOptions
from studies.models import Assignment, Idea, JobRun, Reviewer, Study, StudyMember
from studies.phase_links import phase_link
from studies.protocol.template import render_sections
from studies.report_files import report_build
from studies.services.study import study_create
from studies.services.transfer import reviews_import, reviews_parse
from tests.conftest import ROOT, SI_REVIEWS, SI_TITLES

pytestmark = pytest.mark.slow  # pages of every state, report builds

LINK = re.compile(r'\b(href|hx-get)="([^"]*)"')
# What a page offers to send: forms (their action, or the page itself when they have
# none), htmx posts and submit buttons sending elsewhere than their form.
FORM = re.compile(r"<form\b[^>]*>", re.I)
POSTS = re.compile(r'\b(?:hx-post|formaction)="([^"]*)"')
# What a Content-Security-Policy without 'unsafe-inline' would refuse on a served page.
INLINE = re.compile(
    r"<style[\s>]|<[a-zA-Z][^>]*\s(?:style|on[a-z]+)=|<script(?![^>]*\ssrc=)[^>]*>", re.I
)
# Pages beyond this per crawl would mean a link generator gone wrong (or a huge study).
PAGE_LIMIT = 800
# The same view with other ids (the 300th idea's row) adds time, not coverage.
PER_VIEW = 6
CONDITIONS = {"Quill_Human_Panel": "human", "Quill_Machine_Draft": "ai"}
INSTITUTIONS = ["Quillfeather Institute", "Marlowe University"]
TOPICS = ["Factuality", "Reasoning"]
FAST = ReportOptions(
    consistency_splits=20,
    consistency_bootstrap=20,
    consistency_permutations=20,
    seed=1,
    mixed_starts=1,
    agreement_splits=10,
    agreement_bootstrap=10,
    agreement_permutations=10,
)


# The tags the label check reads (comments skipped): a scan of these instead of a full
# HTML parse of every page, which was a tenth of a crawl's CPU.
_CONTROL_TAG = re.compile(
    r"<!--.*?-->|<(/?)(label|input|select|textarea)(?=[\s/>])((?:[^>\"']|\"[^\"]*\"|'[^']*')*)>",
    re.I | re.S,
)
_ATTRIBUTE = re.compile(r"""([^\s"'=<>`/]+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'<>`]+)))?""")
UNNAMED_TYPES = {"hidden", "submit", "button", "reset", "image"}


def _attributes(text: str) -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for m in _ATTRIBUTE.finditer(text):
        name, *values = m.groups()
        value = next((v for v in values if v is not None), None)
        found.setdefault(name.lower(), unescape(value) if value is not None else None)
    return found


def unlabelled_controls(html: str) -> list[str]:
    """Form controls a screen reader could not name: no <label> around them or pointing at
    them, and no aria-label, aria-labelledby or title."""
    depth = 0
    label_for: set[str] = set()
    controls: list[tuple[str, str]] = []  # (id, description) of unlabelled ones
    for m in _CONTROL_TAG.finditer(html):
        closing, tag, rest = m.groups()
        if tag is None:  # a comment
            continue
        tag = tag.lower()
        if closing:
            if tag == "label" and depth:
                depth -= 1
            continue
        a = _attributes(rest)
        if tag == "label":
            if a.get("for"):
                label_for.add(str(a["for"]))
            if not rest.rstrip().endswith("/"):  # <label/> opens and closes at once
                depth += 1
            continue
        if tag == "input" and (a.get("type") or "text").lower() in UNNAMED_TYPES:
            continue
        if depth or a.get("aria-label") or a.get("aria-labelledby") or a.get("title"):
            continue
        controls.append((str(a.get("id") or ""), f"<{tag} name={a.get('name')!r}>"))
    return [what for id_, what in controls if not id_ or id_ not in label_for]


@dataclass
class Crawl:
    status: dict[str, int] = field(default_factory=dict)
    leaks: dict[str, list[str]] = field(default_factory=dict)
    inline: dict[str, str] = field(default_factory=dict)
    unlabelled: dict[str, list[str]] = field(default_factory=dict)
    actions: dict[str, str] = field(default_factory=dict)  # target path -> a page offering it

    @property
    def errors(self) -> dict[str, int]:
        return {url: code for url, code in self.status.items() if code >= 500}

    @property
    def ok_pages(self) -> int:
        return sum(1 for code in self.status.values() if code == 200)


def _links(base: str, html: str) -> Iterator[tuple[str, bool]]:
    for attr, raw in LINK.findall(html):
        link = raw.replace("&amp;", "&").strip()
        if not link or link.startswith(("#", "mailto:", "javascript:", "data:", "tel:")):
            continue
        url = urljoin(base, link)
        parts = urlsplit(url)
        if parts.netloc not in ("", "testserver") or parts.scheme not in ("", "http"):
            continue
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        if path.startswith(("/static/", "/logout")):
            continue
        yield path, attr == "hx-get"


def _actions(base: str, html: str) -> Iterator[str]:
    """The same-site paths a page's forms and htmx attributes post to."""
    targets: list[str] = []
    for tag in FORM.findall(html):
        if re.search(r'\bmethod="post"', tag, re.I):
            action = re.search(r'\baction="([^"]*)"', tag)
            targets.append(action.group(1) if action else "")
    targets += POSTS.findall(html)
    for raw in targets:
        url = urljoin(base, raw.replace("&amp;", "&").strip())
        parts = urlsplit(url)
        if parts.netloc in ("", "testserver") and not parts.path.startswith("/logout"):
            yield parts.path + (f"?{parts.query}" if parts.query else "")


def refused_actions(client: Client, result: Crawl) -> list[str]:
    """Each action the crawled pages offered that the same user is refused (403).

    Sent with no data, one target per view, each inside a savepoint rolled back at once,
    so a permitted action changes nothing the crawl goes on to see.
    """
    refused: list[str] = []
    sent: Counter[str] = Counter()
    for target, page in sorted(result.actions.items()):
        view = _view_name(target)
        sent[view] += 1
        if sent[view] > 1:
            continue
        with transaction.atomic():
            status = client.post(target).status_code
            transaction.set_rollback(True)
        if status == 403:
            refused.append(f"{page} offers POST {target}, which answers 403")
    return refused


def _view_name(url: str) -> str:
    try:
        return resolve(urlsplit(url).path).view_name
    except Resolver404:
        return url


def _body(response: Any) -> str:
    data = b"".join(response.streaming_content) if response.streaming else response.content
    if "html" not in response.get("Content-Type", ""):
        return ""
    return data.decode(errors="replace")


def crawl(client: Client, starts: list[str], secrets: list[str] | None = None) -> Crawl:
    """GET every page reachable from `starts`; record statuses (and leaks of `secrets`)."""
    result = Crawl()
    queue: deque[tuple[str, bool]] = deque((s, False) for s in starts)
    seen: set[tuple[str, bool]] = set()
    per_view: Counter[tuple[str, bool]] = Counter()
    while queue and len(seen) < PAGE_LIMIT:
        url, htmx = queue.popleft()
        if (url, htmx) in seen:
            continue
        seen.add((url, htmx))
        view = _view_name(url)
        per_view[view, htmx] += 1
        if per_view[view, htmx] > PER_VIEW:
            continue
        headers = {"HX-Request": "true"} if htmx else {}
        response = client.get(url, headers=headers)
        key = f"{url} (htmx)" if htmx else url
        result.status[key] = response.status_code
        body = _body(response)
        found_inline = INLINE.search(body)
        if found_inline and not url.endswith("report.html"):  # the self-contained document
            result.inline[key] = found_inline.group(0)[:80]
        if body and not url.endswith("report.html"):
            missing = unlabelled_controls(body)
            if missing:
                result.unlabelled[key] = missing
        if secrets is not None:
            low = (url + body + str(dict(response.headers))).lower()
            found = [s for s in secrets if s.lower() in low]
            if found:
                result.leaks[key] = found
        for target in _actions(url, body):
            result.actions.setdefault(target, key)
        if response.status_code in (301, 302, 303, 307, 308):
            queue.extend(_links(url, f'href="{response["Location"]}"'))
        for link, is_hx in _links(url, body):
            queue.append((link, False))
            if is_hx:
                queue.append((link, True))
    assert len(seen) < PAGE_LIMIT, f"crawl from {starts} passed {PAGE_LIMIT} pages"
    return result


# --------------------------------------------------------------------------- the study


def _proposal(n: int, topic: str) -> str:
    return render_sections(
        {
            "title": f"Checked drafting for {topic.lower()}, variant {n}",
            "problem_statement": "Language models state false facts that users cannot spot.",
            "motivation": "Checks at the end come after errors have compounded.",
            "proposed_method": "Draft, then check each claim against retrieved evidence.",
            "experiment_plan": "1. Collect questions. 2. Run the baseline. 3. Run the method.",
            "test_cases": "Input: a question with one false claim. Expected: it is removed.",
            "fallback_plan": "If checks do not help, analyse which claims they miss.",
        }
    )


@dataclass
class World:
    """The personas and the study they crawl, advanced one state at a time."""

    owner: Any
    editor: Any
    viewer: Any
    other: Any
    reviewer_user: Any
    study: Study | None = None
    secrets: list[str] = field(default_factory=list)
    helpers: list[Any] = field(default_factory=list)


def _user(name: str) -> Any:
    return get_user_model().objects.create_user(name, email=f"{name}@example.org", password="pw")


def _team(world: World) -> None:
    for user, role in ((world.editor, "editor"), (world.viewer, "viewer")):
        StudyMember.objects.create(study=world.study, user=user, role=role, added_by=world.owner)


def intake_created(world: World) -> None:
    world.study = study_create(
        owner=world.owner,
        slug="intake",
        title="Intake study",
        baseline_condition="Quill_Human_Panel",
    )
    _team(world)
    world.secrets = [*CONDITIONS, *INSTITUTIONS]


def intake_ideas_in(world: World) -> None:
    study = world.study
    for name in TOPICS:
        services.topic_add(study=study, name=name, actor=world.owner)
    for key, kind in CONDITIONS.items():
        services.condition_add(study=study, key=key, kind=kind, actor=world.owner)
    n = 0
    for key in CONDITIONS:
        for k in range(4):
            n += 1
            topic = TOPICS[k % 2]
            external_id = f"XID-{n:02d}"
            batch = services.ideas_read_pasted(
                study=study,
                text=_proposal(n, topic),
                external_id=external_id,
                topic=topic,
                conditions=[key],
                institution=INSTITUTIONS[k % 2] if CONDITIONS[key] == "human" else "",
            )
            services.ideas_import(study=study, batch=batch, source=external_id, actor=world.owner)
            world.secrets.append(external_id)


def intake_normalizing(world: World, base_url: str) -> None:
    config = judge_config_create(
        name="crawl test server",
        study=world.study,
        actor=world.owner,
        base_url=base_url,
        model="scripted-1",
        api_key_env="IDEAREVIEW_CRAWL_KEY",
        parameters={"temperature": 0},
        concurrency=2,
        timeout_seconds=10,
        max_attempts=2,
        backoff_seconds=0.01,
    )
    services.normalization_config_choose(study=world.study, config=config, actor=world.owner)
    # Inside the test's transaction on_commit never fires: the job stays queued.
    services.normalization_enqueue(study=world.study, actor=world.owner)


def intake_open(world: World) -> None:
    from studies.tasks import normalize_ideas

    study = world.study
    job = JobRun.objects.filter(study=study).order_by("-pk").first()
    normalize_ideas(job.pk)
    job.refresh_from_db()
    assert job.status == JobRun.Status.DONE, (job.message, job.error)
    for idea_id in services.signoff_queue(study):
        services.normalization_approve(idea=Idea.objects.get(pk=idea_id), actor=world.owner)
    services.study_open_for_review(study=study, actor=world.owner)
    for j in range(4):
        user = world.reviewer_user if j == 0 else _user(f"crawl-rev-{j}")
        invitation = services.invitation_create(
            study=study, email=user.email, name=f"Reviewer {j}", actor=world.owner
        )
        reviewer = services.invitation_accept(
            token=services.invitation_token(invitation), user=user
        )
        services.reviewer_consent(reviewer=reviewer)
        services.reviewer_profile_save(
            reviewer=reviewer,
            data={
                "institution": f"Crawl Lab {j}",
                "position": "Postdoc",
                "major_venue_papers": 2,
                "topic_first": TOPICS[j % 2],
                "topic_second": TOPICS[(j + 1) % 2],
                "preferred_load": 4,
            },
        )
    services.invitation_create(study=study, email="pending@example.org", actor=world.owner)
    services.reviewers_screen_by_rule(study=study, actor=world.owner)


def intake_reviewing(world: World) -> None:
    study = world.study
    study.refresh_from_db()
    job, result, _ = services.assignment_preview(study=study, seed=3, actor=world.owner)
    assert result.feasible, result.explanation()
    services.assignment_commit(study=study, job=job, actor=world.owner)
    metrics = study.form_definition().metric_keys
    answers: dict[str, Any] = {m: 6 for m in metrics}
    answers |= {f"{m}_rationale": "The plan is concrete and testable. " * 6 for m in metrics}
    answers |= {"familiarity": 3, "confidence": 4, "minutes": 30}
    for k, reviewer in enumerate(Reviewer.objects.filter(study=study).order_by("pk")):
        mine = list(Assignment.objects.filter(reviewer=reviewer).order_by("pk"))
        # Most reviews submitted, one draft each and (for the first reviewer) pending ones.
        for a in mine[:1] if k == 0 else mine[:-1]:
            services.review_submit(assignment=a, cleaned=dict(answers))
        if len(mine) > 1:
            services.review_draft_save(assignment=mine[-1], draft={"novelty": "4"})
    services.pair_tasks_create(study=study, per_reviewer=2, seed=3, actor=world.owner)


def intake_closed(world: World) -> None:
    services.study_close(study=world.study, actor=world.owner)


def reported(world: World) -> None:
    report_build(study=world.study, options=FAST)
    run = judge_run_create(study=world.study, method="baseline_random", actor=world.owner)
    judge_run_execute(run=run)


def intake_reported(world: World) -> None:
    """Panel runs of two judges (pairwise and direct) before the report, so the run pages,
    the judges' own pages and the report show panel figures too."""
    from llm.models import JudgeConfig

    first = JudgeConfig.objects.get(study=world.study, name="crawl test server")
    second = judge_config_create(
        name="crawl second judge",
        study=world.study,
        actor=world.owner,
        base_url=first.base_url,
        model="scripted-2",
        api_key_env="IDEAREVIEW_CRAWL_KEY",
        parameters={"temperature": 0},
        concurrency=2,
        timeout_seconds=10,
        max_attempts=2,
        backoff_seconds=0.01,
    )
    for method in ("pairwise", "direct"):
        run = judge_run_create(
            study=world.study, method=method, config=first, panel=[second], actor=world.owner
        )
        judge_run_execute(run=run)
    reported(world)


def import_created(world: World) -> None:
    world.study = study_create(
        owner=world.owner, slug="imported", title="Imported study", baseline_condition="Human"
    )
    _team(world)


def import_reviews_in(world: World) -> None:
    parsed = reviews_parse(
        study=world.study,
        fmt="si2024",
        reviews=SI_REVIEWS.read_bytes(),
        reviews_name=SI_REVIEWS.name,
        titles=SI_TITLES.read_bytes(),
        titles_name=SI_TITLES.name,
    )
    reviews_import(study=world.study, parsed=parsed, kind="si2024", actor=world.owner)


def import_reported(world: World) -> None:
    """The imported ideas have no text, and a judge run over none of them is refused: two
    are given a text by hand first, as their owner would, then the study is reported."""
    for idea in world.study.ideas.order_by("pk")[:2]:
        services.idea_sections_update(
            idea=idea, sections={"title": f"Idea {idea.pk}"}, actor=world.owner
        )
    reported(world)


def import_linked(world: World) -> None:
    """A second study, the (synthetic) execution phase of the imported ideas, linked to
    it as its later phase and reported: the phases page and the comparison."""
    call_command(
        "import_reviews",
        format="generic",
        reviews=ROOT / "tests" / "data" / "synthetic_execution_release.json",
        study="imported-exec",
        owner=world.owner.get_username(),
        form="execution",
        baseline="Human",
        human_conditions="Human",
        map=["code_quality=codebase_quality"],
        stdout=io.StringIO(),
    )
    later = Study.objects.get(slug="imported-exec")
    for user, role in ((world.editor, "editor"), (world.viewer, "viewer")):
        StudyMember.objects.create(study=later, user=user, role=role, added_by=world.owner)
    phase_link(later=later, earlier=world.study, actor=world.owner)
    report_build(study=later, options=FAST)


# (state, how to reach it from the previous one, minimum pages answering 200 for each
# team member (owner, editor, viewer), and for the reviewer). The researcher outside the
# study reaches the study list only. A reviewer on no study yet reaches their reviews
# home only: "/" and "/studies/" send them there.
Plan = list[tuple[str, Callable[..., None], int, int]]
INTAKE: Plan = [
    ("created", intake_created, 28, 1),
    ("ideas in", intake_ideas_in, 45, 1),
    ("normalizing", intake_normalizing, 45, 1),
    ("open", intake_open, 50, 2),
    ("reviewing", intake_reviewing, 50, 6),
    ("closed", intake_closed, 50, 6),
    ("reported", intake_reported, 55, 6),
]
IMPORTED: Plan = [
    ("created", import_created, 28, 1),
    ("reviews in", import_reviews_in, 45, 1),
    ("reported", import_reported, 50, 1),
    ("linked", import_linked, 80, 1),
]


def personas(world: World) -> dict[str, tuple[Any, list[str]]]:
    return {
        "owner": (world.owner, ["/"]),
        "editor": (world.editor, ["/"]),
        "viewer": (world.viewer, ["/"]),
        "other": (world.other, ["/"]),
        "reviewer": (world.reviewer_user, ["/", "/studies/r/home/"]),
    }


def _clear_rate_limits() -> None:
    """Rate limits count per crawl, not per test: empty their buckets and nothing else,
    so what pages cache (a finished run's reliability panel) is computed once per test,
    as a server computes it once, and not once per persona."""
    backend = caches["default"]
    assert isinstance(backend, LocMemCache), "the tests' cache is a local-memory one"
    with backend._lock:
        stale = [key for key in backend._cache if ":ratelimit:" in key]
    backend.delete_many([key.split(":", 2)[2] for key in stale])


def crawl_states(world: World, plan: Plan, advance_args: dict[str, Any]) -> list[str]:
    """Advance through `plan`, crawling as every persona; return every failure found."""
    failures: list[str] = []
    table: list[str] = []
    for state, advance, team_min, reviewer_min in plan:
        minima = {"owner": team_min, "editor": team_min, "viewer": team_min}
        minima |= {"other": 1, "reviewer": reviewer_min}
        args = [advance_args[state]] if state in advance_args else []
        advance(world, *args)
        for name, (user, starts) in personas(world).items():
            _clear_rate_limits()
            client = Client()
            client.force_login(user)
            secrets = world.secrets if name == "reviewer" else None
            result = crawl(client, starts, secrets)
            table.append(f"{state:12} {name:9} {result.ok_pages:4} pages")
            failures += [f"{state} / {name}: GET {u} -> {c}" for u, c in result.errors.items()]
            failures += [f"{state} / {name}: {u} leaks {s}" for u, s in result.leaks.items()]
            failures += [f"{state} / {name}: {u} inline {s!r}" for u, s in result.inline.items()]
            failures += [
                f"{state} / {name}: {u} unlabelled {s}" for u, s in result.unlabelled.items()
            ]
            if name in ("editor", "viewer"):  # the owner may send anything
                failures += [f"{state} / {name}: {r}" for r in refused_actions(client, result)]
            if result.ok_pages < minima[name]:
                failures.append(
                    f"{state} / {name}: {result.ok_pages} pages reached, at least "
                    f"{minima[name]} expected: {sorted(result.status)}"
                )
    print("\n".join(table))
    return failures


@pytest.fixture
def world(db, owner, other_researcher, settings) -> World:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    # No PDFs: chromium costs seconds a report, and the report page without one offers
    # the rest (the PDF's own link and download are the report page's browser test).
    settings.IDEAREVIEW_CHROMIUM = "/nonexistent/chromium"
    return World(
        owner=owner,
        editor=_user("crawl-editor"),
        viewer=_user("crawl-viewer"),
        other=other_researcher,
        reviewer_user=_user("crawl-reviewer"),
    )


def test_no_page_of_an_idea_intake_study_answers_5xx_in_any_state(world, tmp_path, settings):
    from judging.testserver import Rules, TestServer

    settings.REPORTS_ROOT = tmp_path
    with TestServer(Rules()) as server:
        failures = crawl_states(world, INTAKE, {"normalizing": server.base_url})
    assert not failures, "\n".join(failures)


def test_no_page_of_a_review_import_study_answers_5xx_in_any_state(world, tmp_path, settings):
    settings.REPORTS_ROOT = tmp_path
    failures = crawl_states(world, IMPORTED, {})
    assert not failures, "\n".join(failures)


def test_the_label_check_names_each_control_a_screen_reader_could_not_name() -> None:
    page = """
    <!-- <input name="commented"> -->
    <label>Title <input name="wrapped"></label>
    <label for="topic">Topic</label><select id="topic" name="topic"></select>
    <input id="orphan" name="orphan"><input name="bare" data-note="a > b">
    <textarea name="why" aria-label="Why"></textarea><input name="q" title="Search">
    <input type="hidden" name="csrf"><input type="SUBMIT"><INPUT TYPE=Text NAME=Shout>
    <label for="a&amp;b">A and B</label><input id="a&amp;b" name="amp">
    <label/><input name="after_empty_label">
    """
    assert unlabelled_controls(page) == [
        "<input name='orphan'>",
        "<input name='bare'>",
        "<input name='Shout'>",
        "<input name='after_empty_label'>",
    ]
