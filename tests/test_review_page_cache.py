"""The review page's kept parts (a scale's radio buttons, an idea's Markdown) give the
page it gave when everything was rendered on each visit, and never a stale one."""

from __future__ import annotations

import re
import urllib.parse

import pytest
from django.template import Context, Template

from studies.models import Idea
from studies.templatetags import display, review_page
from studies.templatetags.review_page import scale_levels
from tests.factories import review_study

# The review page's loop over a scale's levels as it was written inline before its
# radio buttons were rendered by a template of their own: the reference they must match.
INLINE = Template(
    """{% for value, anchor in m.levels %}
          <label class="level"><input type="radio" name="{{ m.key }}" value="{{ value }}" {% if m.value == value %}checked{% endif %}><span class="num">{{ value }}</span>{% if anchor %}<span>{{ anchor }}</span>{% endif %}</label>
          {% endfor %}"""  # noqa: E501
)
LEVELS = (("1", "Poor <b>&\"'"), ("2", ""), ("3", "Fair"), ("4", ""), ("5", "Great & new"))
FORM = "application/x-www-form-urlencoded"


def _clear() -> None:
    review_page._levels_cached.cache_clear()
    display._markdown_cached.cache_clear()


@pytest.mark.parametrize("value", ["", "1", "3", "5", "6", "0", "<b>", 3, None])
def test_a_scales_buttons_are_the_inline_loops_cold_and_warm(value):
    _clear()
    scale = {"key": "novelty", "levels": LEVELS, "value": value}
    expected = INLINE.render(Context({"m": scale}))
    assert scale_levels(scale) == expected
    assert scale_levels(dict(scale)) == expected


def test_only_answers_on_the_scale_are_kept():
    _clear()
    for value in ["", "2", "2", "7", "junk"]:
        scale_levels({"key": "novelty", "levels": LEVELS, "value": value})
    info = review_page._levels_cached.cache_info()
    assert (info.currsize, info.hits) == (2, 1)


def test_the_kept_buttons_follow_the_answer_and_the_form():
    _clear()
    first = scale_levels({"key": "novelty", "levels": LEVELS, "value": "2"})
    other = scale_levels({"key": "novelty", "levels": LEVELS, "value": "4"})
    assert 'value="2" checked>' in first and 'value="4" checked>' not in first
    assert 'value="4" checked>' in other and 'value="2" checked>' not in other
    renamed = (("1", "Weak"), *LEVELS[1:])
    assert "Weak" in scale_levels({"key": "novelty", "levels": renamed, "value": "2"})
    assert "Weak" not in scale_levels({"key": "novelty", "levels": LEVELS, "value": "2"})


def _page(client, url: str) -> str:
    html = client.get(url).content.decode()
    # the CSRF token is masked anew on each page
    html = re.sub(r'(csrfmiddlewaretoken" value=")[^"]+', r"\1X", html)
    return re.sub(r'("X-CSRFToken": ")[^"]+', r"\1X", html)


def test_the_review_page_is_the_same_with_its_parts_kept_or_not(owner, client):
    study = review_study(owner, slug="kept", n_reviewers=1, n_ideas=2, per_reviewer=2)
    assignment = study.assignments[study.reviewers[0].pk][0]
    client.force_login(study.users[0])
    url = f"/studies/r/assignments/{assignment.pk}/"
    _clear()
    cold = _page(client, url)
    assert review_page._levels_cached.cache_info().currsize > 0
    assert display._markdown_cached.cache_info().currsize > 0
    assert _page(client, url) == cold
    # an answer saved since: its button is checked, on a page otherwise the same
    metric = study.study.form_definition().metrics[0].key
    body = urllib.parse.urlencode({metric: "2", "version": "0"})
    client.post(f"{url}draft/", body, content_type=FORM, headers={"HX-Request": "true"})
    answered = _page(client, url)
    assert f'name="{metric}" value="2" checked>' in answered
    assert f'name="{metric}" value="2" checked>' not in cold
    _clear()
    assert _page(client, url) == answered


def test_an_edited_idea_shows_its_new_text_at_once(owner, client):
    study = review_study(owner, slug="edited", n_reviewers=1, n_ideas=1, per_reviewer=1)
    assignment = study.assignments[study.reviewers[0].pk][0]
    client.force_login(study.users[0])
    url = f"/studies/r/assignments/{assignment.pk}/"
    assert "wrong facts" in _page(client, url)
    idea = assignment.idea
    text = idea.normalized_text.replace("wrong facts", "**invented** facts")
    Idea.objects.filter(pk=idea.pk).update(normalized_text=text)
    page = _page(client, url)
    assert "<strong>invented</strong> facts" in page and "wrong facts" not in page


def test_an_ideas_sections_are_split_once_per_text_and_anew_for_an_edited_one():
    from studies.services import reviews
    from studies.services.reviews import idea_sections
    from tests.factories import IDEA_TEXT

    reviews._sections_of.cache_clear()
    text = IDEA_TEXT.format(title="Kept", filler="We measure it.")
    first = idea_sections(text)
    first.append(("Injected", "changed by a caller"))  # a caller's list is its own
    again = idea_sections(text)
    assert again == first[:-1] and ("Problem Statement", again[1][1]) == again[1]
    assert reviews._sections_of.cache_info().hits == 1
    edited = idea_sections(text.replace("We measure it.", "We count it."))
    assert any("We count it." in body for _, body in edited)
    assert not any("We measure it." in body for _, body in edited)
