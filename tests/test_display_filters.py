"""The display filters: idea Markdown is sanitised, plots lose their inline CSS."""

from __future__ import annotations

import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from django.template.loader import render_to_string  # noqa: E402

from studies.templatetags import display  # noqa: E402
from studies.templatetags.display import csp_svg, markdown, report_body  # noqa: E402

ATTACKS = """# Method

<script>alert(1)</script>
<iframe src="https://evil.example/"></iframe>
<img src="x" onerror="alert(2)">
[click](javascript:alert(3)) and [data](data:text/html,hi) and <a href="javascript:alert(4)">raw</a>
<div onclick="alert(5)" style="color:red">styled</div>
![pic](https://tracker.example/pixel.png)
"""


def test_markdown_keeps_structure():
    html = markdown(
        "## Plan\n\n1. **Collect** data\n2. Run `baseline`\n\n[paper](https://arxiv.org/abs/1)"
    )
    assert "<h2>Plan</h2>" in html and "<ol>" in html and "<strong>Collect</strong>" in html
    assert "<code>baseline</code>" in html
    assert 'href="https://arxiv.org/abs/1"' in html and 'rel="noopener noreferrer nofollow"' in html


def test_markdown_strips_scripts_frames_handlers_styles_and_javascript_urls():
    html = markdown(ATTACKS)
    low = html.lower()
    for tag in ("<script", "<iframe", "<img", "<div"):
        assert tag not in low, (tag, html)
    assert not re.search(r"<[^>]*\s(?:on[a-z]+|style)=", low), html
    assert not re.search(r"<a\b[^>]*href=\"\s*(?:javascript|data):", low), html
    assert "tracker.example" not in low
    # Raw HTML is shown as text, not dropped silently: the reviewer sees what was written.
    assert "&lt;script&gt;" in html


def test_markdown_of_nothing_is_empty():
    assert markdown(None) == "" and markdown("") == ""


def test_markdown_is_rendered_once_per_text_and_anew_for_an_edited_one():
    display._markdown_cached.cache_clear()
    text = "## Plan\n\nWe **measure** it."
    cold = markdown(text)
    warm = markdown(str(text))
    assert warm == cold == display.markdown_clean(text)
    info = display._markdown_cached.cache_info()
    assert (info.misses, info.hits) == (1, 1)
    # an edited text is its own key: its own HTML, never the old one's
    edited = markdown(text.replace("measure", "count"))
    assert "<strong>count</strong>" in edited and "measure" not in edited
    assert display._markdown_cached.cache_info().misses == 2


def test_markdown_from_the_cache_is_as_clean_as_rendered():
    display._markdown_cached.cache_clear()
    cold, warm = markdown(ATTACKS), markdown(ATTACKS)
    assert cold == warm == display.markdown_clean(ATTACKS)
    assert "<script" not in warm.lower() and "&lt;script&gt;" in warm
    assert display._markdown_cached.cache_info().hits == 1


def plot_svg() -> str:
    import io

    fig, ax = plt.subplots()
    ax.plot([1, 2, 3], [3, 1, 2])
    ax.set_title("a title")
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.find("<svg") :]


def test_plots_keep_their_drawing_without_inline_css():
    svg = plot_svg()
    assert 'style="' in svg and "<style" in svg
    out = str(csp_svg(svg))
    assert not re.search(r"\sstyle=", out) and "<style" not in out
    assert 'stroke-linecap="butt"' in out and "fill=" in out and "stroke-width=" in out
    assert out.count("<path") == svg.count("<path")


def test_the_report_body_loses_its_style_element_and_inline_css():
    body = "<style>.rep{color:red}</style><div class='rep'>" + plot_svg() + "</div>"
    out = str(report_body(body))
    assert "<style" not in out and not re.search(r"\sstyle=", out) and "<svg" in out


def test_report_numbers_round_half_away_from_zero():
    """A column of medians must not show 3.75 as 3.8 but 3.25 as 3.2 (Python rounds the
    binary float to even): every fixed-decimal number rounds its written value half away
    from zero."""
    from django.template import Context, Template

    from studies.templatetags.report_format import cell, num, pct, pval

    assert num(3.25, 1) == "3.3" and num(3.75, 1) == "3.8"
    assert num(-3.25, 1) == "-3.3" and num(-3.75, 1) == "-3.8"
    assert num(2.675, 2) == "2.68"  # the float is 2.67499999…, the number written is 2.675
    assert num(2.5, 0) == "3" and num(0.125) == "0.125" and num(3, 2) == "3.00"
    assert num(None) == num(float("nan")) == "–" and num("n/a") == "n/a"
    assert num(float("inf"), 1) == "inf"
    assert pval(0.0125) == "0.013" and pval(0.0005) == "5.00e-04" and pval(0.9996) == "1"
    assert pct(0.0285) == "2.9%" and pct(1) == "100.0%"
    assert cell({"value": 0.125, "format": "num2", "ci_low": -0.125, "ci_high": 0.375}) == (
        "0.13 (\u22120.13 to 0.38)"
    )
    assert cell({"value": 0.0285, "format": "pct"}) == "2.9%"
    # the report's template filter, as the Mean per idea table calls it
    page = Template("{% load report_format %}{{ a|num:1 }} {{ b|num:1 }}").render(
        Context({"a": 3.25, "b": 3.75})
    )
    assert page == "3.3 3.8"


def test_intervals_read_low_to_high_with_a_true_minus_and_one_dash_when_a_bound_is_missing():
    from django.template import Context, Template

    from studies.analysis.rounding import interval_text, line_text

    minus = "\u2212"
    assert interval_text(-1.666, -0.055, 2) == f"{minus}1.67 to {minus}0.06"
    assert interval_text(-19, 7.8, 3) == f"{minus}19.000 to 7.800"
    assert interval_text(None, 2.0) == interval_text(1.0, float("nan")) == "—"
    assert interval_text(-0.001, 0.004, 2) == "0.00 to 0.00"  # no sign on a rounded zero
    assert interval_text(0.4625, 0.5, 1, percent=True) == "46.3% to 50.0%"
    assert line_text(10.1, -0.72, "judge") == f"10.10 {minus} 0.72·judge"
    assert line_text(-1, 0.5, "judge") == f"{minus}1.00 + 0.50·judge"
    # the template filter reads low/high, or ci_low/ci_high, or a named pair
    page = Template(
        "{% load report_format %}{{ a|interval:2 }}|{{ b|interval:3 }}|{{ c|interval:2 }}"
        '|{{ d|interval:"pct,split" }}|{{ e|interval:"2,pearson_ci" }}'
    ).render(
        Context(
            {
                "a": {"low": -1.666, "high": -0.055},
                "b": {"low": None, "high": None},
                "c": {"ci_low": -4.1333, "ci_high": 2.1333},
                "d": {"split_low": 0.4, "split_high": 0.61},
                "e": {"pearson_ci_low": -0.2, "pearson_ci_high": 0.3},
            }
        )
    )
    assert page.split("|") == [
        f"{minus}1.67 to {minus}0.06",
        "—",
        f"{minus}4.13 to 2.13",
        "40.0% to 61.0%",
        f"{minus}0.20 to 0.30",
    ]


def test_the_progress_page_writes_leniency_intervals_in_the_report_style():
    quality = {
        "kinds": [],
        "leniency": {
            "overall": {
                "rows": [
                    {
                        "reviewer_id": "R1",
                        "reviews": 4,
                        "effect": -0.3,
                        "low": -0.75,
                        "high": 0.125,
                    },
                    {"reviewer_id": "R2", "reviews": 1, "effect": 0.1, "low": None, "high": None},
                ]
            }
        },
    }
    html = render_to_string(
        "studies/owner/_quality.html", {"quality": quality, "study": {"slug": "s"}}
    )
    assert "<td>−0.75 to 0.13</td>" in html
    assert "<td>—</td>" in html and "[" not in html
