"""Owner-facing study views against the personas: the owner sees, everyone else gets 404."""

from __future__ import annotations

import io
import re

import pytest
from django.urls import reverse

from studies.models import Review, StudyReport
from studies.services.ideas import ideas_exclude
from tests.conftest import SI_REVIEWS, SI_TITLES
from tests.factories import make_prep_study


def owner_urls(slug: str) -> list[str]:
    return [
        reverse("studies:study_detail", args=[slug]),
        reverse("studies:reviews_import_page", args=[slug]),
        reverse("studies:study_report", args=[slug]),
        reverse("studies:study_report_file", args=[slug, "report.json"]),
    ]


@pytest.mark.django_db
def test_anonymous_visitors_are_sent_to_the_login_page(client, si2024_study):
    for url in [reverse("studies:study_list"), *owner_urls("si2024")]:
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith(reverse("login")), url


@pytest.mark.django_db
def test_other_researcher_gets_404_for_every_view_of_a_study_not_theirs(
    client, si2024_study, other_researcher
):
    client.force_login(other_researcher)
    for url in owner_urls("si2024"):
        assert client.get(url).status_code == 404, url
    build = reverse("studies:study_report_build", args=["si2024"])
    assert client.post(build).status_code == 404
    listing = client.get(reverse("studies:study_list"))
    assert reverse("studies:study_detail", args=["si2024"]) not in listing.content.decode()


@pytest.mark.django_db
def test_owner_sees_the_study_and_its_data_quality_summary(client, si2024_study, owner):
    client.force_login(owner)
    page = client.get(reverse("studies:study_detail", args=["si2024"])).content.decode()
    assert "rows: 337" in page
    assert "rows flagged (kept, marked): 2" in page
    assert "AI_Rerank" in page
    assert client.get(reverse("studies:study_list")).status_code == 200


@pytest.mark.django_db
def test_the_study_page_counts_ideas_left_out_by_topic_matching_apart(client, owner):
    study, ideas = make_prep_study(owner, slug="glance")
    ideas_exclude(study=study, ideas=[ideas["gpt"]], reason="topic matching")  # one of two AI ideas
    client.force_login(owner)
    page = client.get(reverse("studies:study_detail", args=[study.slug])).content.decode()
    glance = page.split('id="glance-ideas">', 1)[1].split("</dd>", 1)[0]
    assert glance.startswith("2 ") and "and 1 left out" in glance
    conditions = page.split("<h3>Conditions</h3>", 1)[1].split("</table>", 1)[0]
    assert "<td>AI</td><td>AI</td><td>1</td>" in conditions
    assert "<td>Human</td><td>Human</td><td>1</td>" in conditions


@pytest.mark.django_db
def test_the_study_page_links_every_part_of_the_study(client, owner):
    study, _ = make_prep_study(owner, slug="links")
    client.force_login(owner)
    page = client.get(reverse("studies:study_detail", args=[study.slug])).content.decode()
    for name in ("studies:study_plan", "judging:home", "studies:study_payments"):
        assert f'href="{reverse(name, args=[study.slug])}"' in page, name
    # the study's own pages share one menu, which reaches the report and the settings
    for page_name in ("studies:study_form", "studies:ideas_list", "studies:study_report"):
        page = client.get(reverse(page_name, args=[study.slug])).content.decode()
        for name in ("studies:study_report", "studies:study_settings", "studies:study_plan"):
            assert f'href="{reverse(name, args=[study.slug])}"' in page, (page_name, name)


def _menu_links(page: str) -> set[str]:
    """The hrefs of the study's menu: the first `nav.actions` of the page."""
    menu = re.search(r'<nav class="actions"[^>]*>(.*?)</nav>', page, re.S)
    assert menu, "no study menu"
    return set(re.findall(r'href="([^"]+)"', menu.group(1)))


@pytest.mark.django_db
def test_the_overview_and_the_study_pages_share_one_menu(client, owner, django_user_model):
    """The overview offered imports and the team but not the platform or sizing, the
    pages under it the other way round; one menu now, with the editors' Phases link
    still shown only to those who may edit."""
    from studies.models import StudyMember

    study, _ = make_prep_study(owner, slug="menu")
    pages = (
        "studies:study_detail",
        "studies:study_progress",
        "studies:ideas_list",
        "studies:study_settings",
        "studies:study_members",
        "studies:reviews_import_page",
    )
    overview = reverse("studies:study_detail", args=[study.slug])

    def menus_of_pages() -> list[set[str]]:
        menus = [
            _menu_links(client.get(reverse(n, args=[study.slug])).content.decode()) for n in pages
        ]
        # the overview's menu leaves out only the link to itself
        assert overview not in menus[0] and all(overview in menu for menu in menus[1:])
        return [menus[0] | {overview}, *menus[1:]]

    client.force_login(owner)
    menus = menus_of_pages()
    assert all(menu == menus[0] for menu in menus), pages
    for name in (
        "studies:study_platform",
        "studies:sizing",
        "studies:reviews_import_page",
        "studies:study_members",
        "studies:study_phases",
        "studies:study_report",
    ):
        assert reverse(name, args=[study.slug]) in menus[0], name
    viewer = django_user_model.objects.create_user("viewer", password="viewer-pass-123")
    StudyMember.objects.create(study=study, user=viewer, role=StudyMember.Role.VIEWER)
    client.force_login(viewer)
    seen = menus_of_pages()
    assert all(
        menu == menus[0] - {reverse("studies:study_phases", args=[study.slug])} for menu in seen
    )


@pytest.mark.django_db
def test_report_build_requires_post_and_csrf(si2024_study, owner):
    from django.test import Client

    csrf_client = Client(enforce_csrf_checks=True)
    csrf_client.force_login(owner)
    url = reverse("studies:study_report_build", args=["si2024"])
    assert csrf_client.get(url).status_code == 405
    assert csrf_client.post(url).status_code == 403


@pytest.mark.django_db
def test_owner_imports_through_the_web_and_a_bad_file_changes_nothing(client, owner):
    from studies.services.study import study_create

    study = study_create(owner=owner, slug="web", baseline_condition="Human")
    client.force_login(owner)
    url = reverse("studies:reviews_import_page", args=["web"])
    bad = io.BytesIO(b'{"idea_id": ["x"]')
    bad.name = "broken.json"
    response = client.post(url, {"format": "si2024", "reviews": bad})
    assert response.status_code == 400
    assert "broken.json: not valid JSON" in response.content.decode()
    assert Review.objects.filter(study=study).count() == 0
    with SI_REVIEWS.open("rb") as reviews, SI_TITLES.open("rb") as titles:
        response = client.post(url, {"format": "si2024", "reviews": reviews, "titles": titles})
    assert response.status_code == 200
    assert "unique reviews: 296" in response.content.decode()
    assert Review.objects.filter(study=study).count() == 296


@pytest.mark.django_db
def test_report_files_outside_the_report_folder_are_never_served(
    client, si2024_study, owner, tmp_path, settings
):
    settings.REPORTS_ROOT = str(tmp_path / "reports")
    (tmp_path / "reports" / "si2024" / "v1").mkdir(parents=True)
    (tmp_path / "secret.txt").write_text("secret")
    (tmp_path / "report.json").write_text("{}")
    client.force_login(owner)
    base = reverse("studies:study_report", args=["si2024"]) + "files/"
    # a version folder in the storage, and a row naming a path outside it
    for directory in ["si2024/v1", str(tmp_path), "../.."]:
        StudyReport.objects.create(
            study=si2024_study, data={"files": {"csv": []}}, directory=directory
        )
        for name in ["..%2Fsecret.txt", "settings.py", "report.json", "..%2F..%2Fsecret_key"]:
            response = client.get(base + name)
            assert response.status_code == 404, (directory, name)


@pytest.mark.django_db
def test_every_table_a_report_lists_is_served_and_no_other(
    client, si2024_study, owner, tmp_path, settings
):
    settings.REPORTS_ROOT = str(tmp_path)
    folder = tmp_path / "si2024" / "build"
    folder.mkdir(parents=True)
    listed = ["by_review.csv", "multiplicity.csv", "ordinal.csv"]
    for name in [*listed, "unlisted.csv", "report.json"]:
        (folder / name).write_text("a,b\n1,2\n")
    StudyReport.objects.create(
        study=si2024_study, data={"files": {"csv": listed}}, directory="si2024/build"
    )
    client.force_login(owner)
    for name in [*listed, "report.json"]:
        url = reverse("studies:study_report_file", args=["si2024", name])
        assert client.get(url).status_code == 200, name
    unlisted = reverse("studies:study_report_file", args=["si2024", "unlisted.csv"])
    assert client.get(unlisted).status_code == 404


def test_healthcheck_answers_with_the_database_vendor(client, db):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json()["status"] == "ok"
