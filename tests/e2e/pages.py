"""Browser steps shared by the end-to-end tests, as plain functions (test modules never
import one another): a page in a fresh context, logging in, a reviewer's sign-up, an
upload on the ideas import page, a platform participant's visit, the owner's plan and
report, and downloads."""

from __future__ import annotations

import json
import random
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


# Participants from a platform (Prolific's parameter names). Each step is one function, so
# a test can arrive several participants and answer each one's reviews differently.


def platform_arrive(
    page, slug: str, pid: str, *, session: str = "", study_id: str = "PLATFORM-STUDY"
) -> None:
    """Open the study's arrival link as the platform would send participant `pid`."""
    query = f"PROLIFIC_PID={pid}&STUDY_ID={study_id}"
    if session:
        query += f"&SESSION_ID={session}"
    page.goto(f"/studies/r/join/{slug}/?{query}")


def platform_sign_up(
    page, *, topic: str, load: str = "2", papers: str = "2", institution: str = "Crowd Lab"
) -> None:
    """From the arrival: consent and honour code, then the profile; ends on the reviews
    list (work is given on arrival to a participant the study's rule approves)."""
    page.wait_for_url(re.compile(r"/consent/$"))
    page.check("input[name=consent]")
    page.check("input[name=honor_code]")
    page.click("text=Continue")
    page.wait_for_url(re.compile(r"/studies/r/profile/\d+/$"))
    page.fill("input[name=institution]", institution)
    page.select_option("select[name=position]", "Postdoc")
    page.fill("input[name=major_venue_papers]", papers)
    page.select_option("select[name=topic_first]", topic)
    page.select_option("select[name=preferred_load]", load)
    page.click("text=Save my profile")
    page.wait_for_url(re.compile(r"/studies/r/home/$"))


# Words for rationales that differ from review to review (`distinct_text`): texts drawn
# from them have embedding cosines far below the near-duplicate threshold, so a walk that
# wants no duplicate flag gets none.
_WORDS = (
    "baseline ablation benchmark dataset variance seed prompt retrieval latency "
    "recall precision metric annotator budget cost scaling pipeline tokenizer "
    "overfitting leakage contamination rubric hypothesis protocol replication sample "
    "power effect estimate interval decoder calibration uncertainty temperature "
    "sampling search planner agent memory context summary claim evidence citation "
    "error verification critique revision feedback reward policy training evaluation "
    "expert crowd pilot survey interview proof theorem synthesis coverage runtime "
    "compute"
)
_VOCABULARY = _WORDS.split()


def distinct_text(seed, words: int = 30) -> str:
    """`words` words drawn for `seed` (any hashable text or number): the same seed gives
    the same text, another seed a text no near-duplicate check takes for a copy."""
    rng = random.Random(str(seed))
    return " ".join(rng.choice(_VOCABULARY) for _ in range(words))


def review_answer(
    page, scores=None, *, default: int = 6, words: int = 30, minutes: str = "20", text=None
):
    """Answer the open review page: every radio group (metrics, familiarity, confidence
    and any other item the form shows) at `scores[name]` or `default` (clamped to the
    values it offers), every rationale with `words` words (`text(name)` when given, for
    the rationale box `name`), then submit."""
    scores = scores or {}
    names = page.eval_on_selector_all(
        "input[type=radio]", "els => [...new Set(els.map(e => e.name))]"
    )
    for name in names:
        values = page.eval_on_selector_all(
            f"input[type=radio][name='{name}']", "els => els.map(e => Number(e.value))"
        )
        want = scores.get(name, default)
        value = min(values, key=lambda v: (abs(v - want), v))
        page.check(f"input[type=radio][name='{name}'][value='{value}']")
    for area in page.locator("textarea[name$=_rationale]").all():
        name = area.get_attribute("name")
        area.fill(text(name) if text else " ".join(["considered"] * words))
    if page.locator("input[name=minutes]").count():
        page.fill("input[name=minutes]", minutes)
    page.click("#submit-review")
    page.wait_for_selector("text=Review submitted")


def reviews_complete(page, scores=None, *, text=None, **answer) -> int:
    """From the reviews list, answer and submit every review not yet submitted; returns
    how many. `scores` and `text` may depend on the review: called with its number
    (0, 1, ...), they give that review's scores and its `text(name)`."""
    n = 0
    while True:
        page.goto("/studies/r/home/")
        start = page.locator("a", has_text=re.compile(r"^(Start|Continue)$"))
        if not start.count():
            return n
        start.first.click()
        page.wait_for_url(re.compile(r"/studies/r/assignments/\d+/$"))
        mine = scores(n) if callable(scores) else scores
        review_answer(page, mine, text=text(n) if text else None, **answer)
        n += 1


def platform_finish(page, completion: str) -> str:
    """Press the finish button; wait to land on the completion URL (a regex); return it."""
    page.goto("/studies/r/home/")
    page.click("#platform-complete button")
    page.wait_for_url(re.compile(completion))
    return page.url


# The owner's steps around the analysis: the plan, its registration, a report built by the
# worker, and a file the page offers for download.


def plan_save(page, slug: str, document: dict) -> None:
    """Save `document` (the plan as JSON data) on the study's plan page."""
    page.goto(f"/studies/{slug}/plan/")
    page.fill("textarea[name=document]", json.dumps(document))
    page.click("form button[type=submit]:text('Save the plan')")
    page.wait_for_selector("text=Analysis plan saved.")


def plan_freeze(page, slug: str) -> None:
    """Register (freeze) the study's current plan from its plan page."""
    page.goto(f"/studies/{slug}/plan/")
    page.check("input[name=confirm][value=freeze]")
    page.click("text=Freeze (pre-register) this plan")
    page.wait_for_selector("text=Analysis plan frozen")


def report_build(page, slug: str, timeout: int = 240_000) -> None:
    """Ask for the report on its page, wait for the worker to finish it, open it."""
    page.goto(f"/studies/{slug}/report/")
    page.click("nav.actions form button[type=submit]")
    page.wait_for_selector("#job >> text=/finished/", timeout=timeout)
    page.goto(f"/studies/{slug}/report/")


def download_text(page, link: str) -> tuple[str, str]:
    """Click the download link `link` (a selector); return the file's name and text."""
    with page.expect_download() as download:
        page.click(link)
    return download.value.suggested_filename, download.value.path().read_text(encoding="utf-8")
