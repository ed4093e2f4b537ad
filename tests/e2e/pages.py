"""Browser helpers shared by the end-to-end tests: a page in a fresh context, the owner's login."""

from __future__ import annotations

import re

TIMEOUT = 15_000


def new_page(browser, base: str, width: int = 1280, height: int = 900):
    context = browser.new_context(base_url=base, viewport={"width": width, "height": height})
    context.set_default_timeout(TIMEOUT)
    return context, context.new_page()


def owner_login(page, username: str = "owner", password: str = "owner-pass-123") -> None:
    page.goto("/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/studies/$"))
