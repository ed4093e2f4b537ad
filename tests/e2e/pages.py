"""Browser steps shared by the end-to-end tests, as plain functions (test modules never
import one another): a page in a fresh context, logging in, a reviewer's sign-up, an
upload on the ideas import page."""

from __future__ import annotations

import re

TIMEOUT = 15_000


def new_page(browser, base: str, width: int = 1280, height: int = 900, timeout: int = TIMEOUT):
    context = browser.new_context(base_url=base, viewport={"width": width, "height": height})
    context.set_default_timeout(timeout)
    return context, context.new_page()


def login(page, username: str, password: str, path: str = "/login/") -> None:
    """Fill a login form and send it (the caller waits for where it should land)."""
    page.goto(path)
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")


def owner_login(page, username: str = "owner", password: str = "owner-pass-123") -> None:
    login(page, username, password)
    page.wait_for_url(re.compile(r"/studies/$"))


def reviewer_login(page, username: str, password: str) -> None:
    login(page, username, password, path="/studies/r/login/")
    page.wait_for_url(re.compile(r"/studies/r/home/$"))


def reviewer_sign_up(
    page,
    password: str,
    *,
    institution: str,
    topics: tuple[str, ...],
    load: str = "2",
) -> None:
    """From an opened invitation link: account, consent and profile, up to screening."""
    page.fill("input[name=password1]", password)
    page.fill("input[name=password2]", password)
    page.click("text=Create my account")
    page.wait_for_url(re.compile(r"/consent/$"))
    page.check("input[name=consent]")
    page.check("input[name=honor_code]")
    page.click("text=Continue")
    page.wait_for_url(re.compile(r"/studies/r/profile/\d+/$"))
    page.fill("input[name=institution]", institution)
    page.select_option("select[name=position]", "Postdoc")
    page.fill("input[name=major_venue_papers]", "2")
    page.select_option("select[name=topic_first]", topics[0])
    if len(topics) > 1:
        page.select_option("select[name=topic_second]", topics[1])
    page.select_option("select[name=preferred_load]", load)
    page.click("text=Save my profile")
    page.wait_for_selector("text=with the study team for screening")


def ideas_upload(page, files) -> None:
    """On the ideas import page: choose `files` (a path or Playwright file payloads) and
    send them."""
    page.set_input_files("input[name=file]", files)
    page.click("text=Read and import")
