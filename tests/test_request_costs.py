"""What a reviewer's first requests cost the database: the log-in, the dashboard and the
review page make a fixed number of queries, however many ideas the reviewer has, and the
hand-written statements behind them give what Django's own code gives."""

from __future__ import annotations

import uuid

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import Group, Permission
from django.core.cache import cache, caches
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext

from ideareview.backends import UserBackend
from ideareview.sessions import SessionStore
from tests.conftest import limits_redis_url

PERM_CACHES = ("_perm_cache", "_user_perm_cache", "_group_perm_cache")


def _fresh(user):
    """The user as a new request loads it: no permission cached yet."""
    return get_user_model().objects.get(pk=user.pk)


@pytest.fixture
def member(db):
    user = get_user_model().objects.create_user("member", password="Member-pass-123")
    group = Group.objects.create(name="Editors")
    group.permissions.add(
        Permission.objects.get(content_type__app_label="studies", codename="add_study"),
        Permission.objects.get(content_type__app_label="auth", codename="view_user"),
    )
    user.groups.add(group, Group.objects.create(name="Empty"))
    user.user_permissions.add(
        Permission.objects.get(content_type__app_label="auth", codename="view_user"),
        Permission.objects.get(content_type__app_label="auth", codename="change_group"),
    )
    return user


@pytest.mark.parametrize("kind", ["member", "plain", "inactive", "superuser"])
def test_permissions_are_model_backends_cache_for_cache(member, kind):
    if kind == "plain":
        user = get_user_model().objects.create_user("plain", password="Plain-pass-123")
    elif kind == "superuser":
        user = get_user_model().objects.create_superuser("root", password="Root-pass-123")
    else:
        user = member
        if kind == "inactive":
            get_user_model().objects.filter(pk=user.pk).update(is_active=False)
    ours, django = _fresh(user), _fresh(user)
    assert UserBackend().get_all_permissions(ours) == ModelBackend().get_all_permissions(django)
    for name in PERM_CACHES:
        assert getattr(ours, name, None) == getattr(django, name, None), name
    for perm in ("studies.add_study", "auth.view_user", "auth.change_group", "auth.add_user"):
        assert UserBackend().has_perm(_fresh(user), perm) == ModelBackend().has_perm(
            _fresh(user), perm
        ), perm
    assert UserBackend().get_user_permissions(_fresh(user)) == ModelBackend().get_user_permissions(
        _fresh(user)
    )
    assert UserBackend().get_group_permissions(
        _fresh(user)
    ) == ModelBackend().get_group_permissions(_fresh(user))


def test_permissions_take_one_query_and_are_kept(member, django_assert_num_queries):
    user = _fresh(member)
    with django_assert_num_queries(1):
        assert user.has_perm("studies.add_study")
        assert user.has_perm("auth.change_group")
        assert not user.has_perm("auth.add_user")
        assert user.get_group_permissions() == {"studies.add_study", "auth.view_user"}


# --------------------------------------------------------------------------- the session


@pytest.fixture
def reviewer_user(db):
    return get_user_model().objects.create_user("rev@example.org", password="Reviewer-pass-1")


def _log_in(client, username="rev@example.org", password="Reviewer-pass-1"):
    return client.post("/login/", {"username": username, "password": password})


def test_login_gives_a_new_session_and_deletes_the_old_one(reviewer_user):
    from django.contrib.sessions.models import Session

    client = Client()
    session = client.session
    session["before"] = "kept"  # an anonymous session with data, as a next step leaves
    session.save()
    old_key = session.session_key
    assert Session.objects.filter(session_key=old_key).exists()
    assert _log_in(client).status_code == 302
    new_key = client.cookies[settings.SESSION_COOKIE_NAME].value
    assert new_key and new_key != old_key
    assert not Session.objects.filter(session_key=old_key).exists()
    stored = Session.objects.get(session_key=new_key).get_decoded()
    assert stored["before"] == "kept"
    assert stored["_auth_user_id"] == str(reviewer_user.pk)
    assert client.get("/studies/r/home/").status_code == 200
    # the session also reads from the database alone (a cache restart logs no one out)
    cache.clear()
    assert client.get("/studies/r/home/").status_code == 200


def test_a_taken_session_key_is_drawn_again(reviewer_user, monkeypatch):
    from django.contrib.sessions.models import Session

    from ideareview import sessions

    taken = SessionStore()
    taken["someone"] = "else"
    taken.create()
    draws = iter([taken.session_key, "k" * 32])
    monkeypatch.setattr(sessions, "get_random_string", lambda *a: next(draws))
    client = Client()
    assert _log_in(client).status_code == 302
    assert client.cookies[settings.SESSION_COOKIE_NAME].value == "k" * 32
    assert Session.objects.get(session_key=taken.session_key).get_decoded() == {"someone": "else"}


def test_login_writes_the_session_once(reviewer_user):
    client = Client()
    with CaptureQueriesContext(connection) as ctx:
        assert _log_in(client).status_code == 302
    session_writes = [q["sql"] for q in ctx.captured_queries if "django_session" in q["sql"]]
    assert len(session_writes) == 1 and session_writes[0].startswith("INSERT")


# --------------------------------------------------------------------------- login limits


def _limit_caches() -> list[dict]:
    found = [{"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "costs"}]
    url = limits_redis_url()
    if url is not None:  # a prefix of its own: the database is shared with other runs
        found.append(
            {
                "BACKEND": "ideareview.cache.RedisCache",
                "LOCATION": url,
                "KEY_PREFIX": f"costs-{uuid.uuid4().hex}",
            }
        )
    return found


def _buckets(address: str, username: str) -> list:
    from ideareview.throttle import _login_keys, _rate_window

    return [
        caches["default"].get(_rate_window(key, window)[0])
        for key, (_limit, window) in _login_keys(address, username)
    ]


def test_login_limits_count_and_refund_alike_on_every_cache():
    """Redis counts a login's three keys in one pipeline and refunds them in one script;
    what is counted must be what the cache API's add, incr, touch and decr count."""
    from ideareview.throttle import LOGIN_PAIR_LIMIT, login_attempt, login_succeeded

    seen = []
    for config in _limit_caches():
        with override_settings(CACHES={"default": config}):
            address, trace = f"203.0.113.9-{uuid.uuid4().hex}", []
            login_succeeded(address=address, username="Ann")  # nothing counted yet: no-op
            trace.append(_buckets(address, "ann"))
            for _ in range(3):
                assert not login_attempt(address=address, username="Ann")
            trace.append(_buckets(address, "ann"))
            login_succeeded(address=address, username="ANN")
            trace.append(_buckets(address, "ann"))
            for _ in range(LOGIN_PAIR_LIMIT[0] - 2):
                login_attempt(address=address, username="ann")
            trace.append(_buckets(address, "ann"))
            assert login_attempt(address=address, username="ann")  # over the pair's limit
            seen.append(trace)
    assert seen[0] == [[None, None, None], [3, 3, 3], [2, 2, 2], [10, 10, 10]]
    assert all(trace == seen[0] for trace in seen), seen


# --------------------------------------------------------------------------- a reviewer's start


def _reviewer_client(owner, slug: str, n: int):
    from tests.factories import review_study

    made = review_study(owner, slug=slug, n_reviewers=1, n_ideas=n, per_reviewer=n)
    client = Client()
    client.force_login(made.users[0])
    return client, made.assignments[made.reviewers[0].pk]


def _queries(client, url: str) -> int:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200, url
    return len(ctx.captured_queries)


def test_dashboard_queries_do_not_grow_with_the_assignments(owner):
    one, _ = _reviewer_client(owner, "one", 1)
    six, _ = _reviewer_client(owner, "six", 6)
    assert _queries(one, "/studies/r/home/") == _queries(six, "/studies/r/home/") <= 7
    page = six.get("/studies/r/home/").content.decode()
    for n in range(1, 7):  # each idea listed with its title, parsed once per text
        assert f"Idea {n}: Idea " in page


def test_review_page_queries_do_not_grow_with_the_assignments(owner):
    one, (only,) = _reviewer_client(owner, "one", 1)
    six, assignments = _reviewer_client(owner, "six", 6)
    counts = {_queries(one, f"/studies/r/assignments/{only.pk}/")}
    counts |= {_queries(six, f"/studies/r/assignments/{a.pk}/") for a in assignments[::5]}
    assert len(counts) == 1 and counts.pop() <= 7


def test_login_queries_do_not_grow_with_the_assignments(owner, django_assert_max_num_queries):
    from tests.factories import review_study

    made = review_study(owner, slug="many", n_reviewers=1, n_ideas=6, per_reviewer=6)
    # the user, the last login, the permissions, the team check, the session's insert
    # (inside its transaction)
    with django_assert_max_num_queries(7):
        response = _log_in(Client(), made.users[0].username, made.password)
    assert response.status_code == 302 and response["Location"] == "/studies/r/home/"


def _menu(client, url: str) -> str:
    return client.get(url).content.decode().split("<main")[0]


def test_the_menu_the_pages_tell_is_the_one_the_queries_tell(owner):
    """The dashboard and review page tell the menu the user is a reviewer instead of letting
    it ask; a reviewer on a study's team still gets the study list."""
    from studies.models import StudyMember

    client, (assignment, *_) = _reviewer_client(owner, "menu", 2)
    user = assignment.reviewer.user
    pages = ["/studies/r/home/", f"/studies/r/assignments/{assignment.pk}/"]
    for url in pages:
        menu = _menu(client, url)
        assert 'href="/studies/r/home/"' in menu and 'href="/studies/"' not in menu, url
    StudyMember.objects.create(study=assignment.study, user=user, role=StudyMember.Role.VIEWER)
    for url in pages:
        menu = _menu(client, url)
        assert 'href="/studies/r/home/"' in menu and 'href="/studies/"' in menu, url


# --------------------------------------------------------------------------- the review page's read

PAGE_ROWS = ("study", "study.review_form", "idea", "idea.topic", "reviewer")


def _orm_page_read(user, assignment_id: int):
    """The review page's access check as the ORM wrote it: the reference for the
    hand-written one (studies/page_sql.py)."""
    from studies.models import Assignment, Reviewer, Study

    return (
        Assignment.objects.exclude(status=Assignment.Status.WITHDRAWN)
        .filter(
            reviewer__user=user,
            reviewer__screening=Reviewer.Screening.APPROVED,
            reviewer__dropped_at__isnull=True,
            study__status__in=(Study.Status.REVIEWING, Study.Status.CLOSED),
        )
        .select_related("study__review_form", "idea__topic", "reviewer")
        .filter(pk=assignment_id)
        .first()
    )


def _row(obj, path: str):
    for name in path.split("."):
        obj = getattr(obj, name)
    return obj


def test_the_page_read_gives_what_the_orm_reads(owner):
    """Every column of the six rows, converted as the ORM converts it (datetimes and JSON
    on SQLite), the related rows in place so the page asks for none of them again."""
    from datetime import timedelta

    from django.utils import timezone

    from studies.models import Assignment
    from studies.page_sql import assignment_for_page
    from tests.factories import review_study

    made = review_study(owner, slug="read", n_reviewers=1, n_ideas=2, per_reviewer=2)
    assignment = made.assignments[made.reviewers[0].pk][1]
    at = timezone.now() - timedelta(seconds=40)
    Assignment.objects.filter(pk=assignment.pk).update(
        opened_at=at, last_seen_at=at + timedelta(seconds=7), active_seconds=12.5
    )
    orm = _orm_page_read(made.users[0], assignment.pk)
    with CaptureQueriesContext(connection) as ctx:
        read = assignment_for_page(user_id=made.users[0].pk, assignment_id=assignment.pk)
        rows = {path: _row(read, path) for path in PAGE_ROWS}
    assert len(ctx.captured_queries) == 1
    for path, got in {"": read, **rows}.items():
        want = _row(orm, path) if path else orm
        assert type(got) is type(want) and not got.get_deferred_fields(), path
        for field in type(want)._meta.concrete_fields:
            mine, theirs = getattr(got, field.attname), getattr(want, field.attname)
            assert mine == theirs and type(mine) is type(theirs), (path, field.name)
        assert got._state.db == want._state.db and not got._state.adding, path
    assert read.opened_at.tzinfo is not None
    assert read.study.form_definition() == orm.study.form_definition()


@pytest.mark.parametrize(
    "change",
    [
        "other user",
        "withdrawn",
        "dropped",
        "not approved",
        "study draft",
        "study preparing",
        "no such assignment",
        "study closed",
        "submitted",
    ],
)
def test_the_page_read_refuses_what_the_orm_refused(owner, change):
    from django.utils import timezone

    from studies.models import Assignment, Reviewer, Study
    from studies.page_sql import assignment_for_page
    from tests.factories import review_study

    made = review_study(owner, slug="refuse", n_reviewers=2, n_ideas=2, per_reviewer=1)
    assignment = made.assignments[made.reviewers[0].pk][0]
    user, assignment_id = made.users[0], assignment.pk
    reviewer = Reviewer.objects.filter(pk=assignment.reviewer_id)
    study = Study.objects.filter(pk=made.study.pk)
    if change == "other user":
        user = made.users[1]
    elif change in ("withdrawn", "submitted"):
        Assignment.objects.filter(pk=assignment_id).update(status=change)
    elif change == "dropped":
        reviewer.update(dropped_at=timezone.now())
    elif change == "not approved":
        reviewer.update(screening=Reviewer.Screening.PENDING)
    elif change.startswith("study "):
        study.update(status=change.split()[-1])
    else:
        assignment_id = Assignment.objects.order_by("-pk").first().pk + 1
    orm = _orm_page_read(user, assignment_id)
    read = assignment_for_page(user_id=user.pk, assignment_id=assignment_id)
    assert (read is None) == (orm is None)
    assert (read is not None) == (change in ("study closed", "submitted"))
    client = Client()
    client.force_login(user)
    status = client.get(f"/studies/r/assignments/{assignment_id}/").status_code
    assert status == (200 if read is not None else 404)


# --------------------------------------------------------------------------- the dashboard's reads


def _orm_dashboard(user):
    """The dashboard's reads as the ORM wrote them: the reference for the hand-written
    ones (studies/dashboard_sql.py)."""
    from django.db.models import Prefetch

    from studies.models import Assignment, PairTask, Reviewer

    return list(
        Reviewer.objects.filter(user=user)
        .select_related("study", "platform_participant")
        .prefetch_related(
            Prefetch(
                "assignments",
                queryset=Assignment.objects.exclude(status=Assignment.Status.WITHDRAWN)
                .select_related("idea__topic")
                .order_by("pk"),
            ),
            Prefetch(
                "pair_tasks",
                queryset=PairTask.objects.exclude(status=PairTask.Status.WITHDRAWN).order_by("pk"),
            ),
        )
        .order_by("-pk")
    )


def _same_row(got, want, where: str) -> None:
    assert type(got) is type(want) and not got.get_deferred_fields(), where
    for field in type(want)._meta.concrete_fields:
        mine, theirs = getattr(got, field.attname), getattr(want, field.attname)
        assert mine == theirs and type(mine) is type(theirs), (where, field.name)


def test_the_dashboard_reads_give_what_the_orm_reads(owner):
    """Two profiles of one user (one from a platform), a withdrawn assignment and pair task
    left out, every column of every row as the ORM gives it, nothing read again."""
    from django.utils import timezone

    from studies.dashboard_sql import reviewer_dashboard_rows
    from studies.models import Assignment, PairTask, PlatformParticipant, Reviewer
    from studies.services.platform import platform_participant_of
    from tests.factories import review_study

    first = review_study(owner, slug="dash-a", n_reviewers=1, n_ideas=3, per_reviewer=3)
    second = review_study(owner, slug="dash-b", n_reviewers=1, n_ideas=2, per_reviewer=2)
    user, reviewer = first.users[0], first.reviewers[0]
    Reviewer.objects.filter(pk=second.reviewers[0].pk).update(user=user)
    PlatformParticipant.objects.create(
        study=first.study, reviewer=reviewer, participant_id="P1", secret="s" * 20
    )
    mine = first.assignments[reviewer.pk]
    Assignment.objects.filter(pk=mine[1].pk).update(status=Assignment.Status.WITHDRAWN)
    Assignment.objects.filter(pk=mine[2].pk).update(opened_at=timezone.now())
    ideas = [a.idea for a in mine]
    for a, b, status in [(0, 1, "withdrawn"), (0, 2, "pending"), (1, 2, "submitted")]:
        PairTask.objects.create(
            study=first.study, reviewer=reviewer, idea_a=ideas[a], idea_b=ideas[b],
            a_on_left=True, dimensions=["novelty"], status=status,
        )  # fmt: skip
    orm = _orm_dashboard(user)
    with CaptureQueriesContext(connection) as ctx:
        rows = reviewer_dashboard_rows(user_id=user.pk)
        got = [
            (r.reviewer.study, platform_participant_of(r.reviewer), [a.idea.topic for a in r.assignments])
            for r in rows
        ]  # fmt: skip
    assert len(ctx.captured_queries) == 3 and len(got) == 2
    assert [r.reviewer.pk for r in rows] == [r.pk for r in orm]
    for row, want in zip(rows, orm, strict=True):
        _same_row(row.reviewer, want, "reviewer")
        _same_row(row.reviewer.study, want.study, "study")
        theirs = platform_participant_of(want)
        if theirs is None:
            assert platform_participant_of(row.reviewer) is None
        else:
            _same_row(platform_participant_of(row.reviewer), theirs, "platform")
        assert [a.pk for a in row.assignments] == [a.pk for a in want.assignments.all()]
        for a, w in zip(row.assignments, want.assignments.all(), strict=True):
            _same_row(a, w, "assignment")
            _same_row(a.idea, w.idea, "idea")
            _same_row(a.idea.topic, w.idea.topic, "topic")
        assert [t.pk for t in row.pair_tasks] == [t.pk for t in want.pair_tasks.all()]
        for t, w in zip(row.pair_tasks, want.pair_tasks.all(), strict=True):
            _same_row(t, w, "pair task")
    by_pk = {r.reviewer.pk: r for r in rows}
    assert [t.status for t in by_pk[reviewer.pk].pair_tasks] == ["pending", "submitted"]
    assert len(by_pk[reviewer.pk].assignments) == 2


def test_the_dashboard_of_a_user_with_no_profile_reads_once(owner):
    from studies.dashboard_sql import reviewer_dashboard_rows

    with CaptureQueriesContext(connection) as ctx:
        assert reviewer_dashboard_rows(user_id=owner.pk) == []
    assert len(ctx.captured_queries) == 1


@pytest.mark.parametrize("state", ["no review", "draft", "submitted"])
def test_the_page_read_with_the_review_gives_the_orms_review(owner, state):
    from studies.models import Review
    from studies.page_sql import assignment_for_page
    from studies.services.reviews import review_draft_save, review_submit
    from tests.factories import cleaned, review_study

    made = review_study(owner, slug="with-review", n_reviewers=1, n_ideas=1, per_reviewer=1)
    (assignment,) = made.assignments[made.reviewers[0].pk]
    if state == "draft":
        review_draft_save(assignment=assignment, draft={"novelty": "3"})
    elif state == "submitted":
        review_submit(assignment=assignment, cleaned=cleaned(made.study))
    want = Review.objects.filter(assignment=assignment).first()
    with CaptureQueriesContext(connection) as ctx:
        read = assignment_for_page(
            user_id=made.users[0].pk, assignment_id=assignment.pk, with_review=True
        )
        got = getattr(read, "review", None)
    assert len(ctx.captured_queries) == 1
    if want is None:
        assert got is None and state == "no review"
    else:
        _same_row(got, want, "review")
        assert got.assignment is read
    # the page reads its review with the assignment: no statement of its own
    client = Client()
    client.force_login(made.users[0])
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(f"/studies/r/assignments/{assignment.pk}/").status_code == 200
    review_table = Review._meta.db_table
    alone = [q["sql"] for q in ctx.captured_queries if q["sql"].startswith("SELECT")]
    assert not [q for q in alone if f'FROM "{review_table}"' in q], alone
