"""A matplotlib figure as an inline `<svg>` string: text kept as text, no metadata (so the
same figure gives the same bytes), the figure closed. Pure: matplotlib only."""

from __future__ import annotations

import io
import re
from typing import Any

from studies.analysis.plots import pyplot


def figure_svg(fig: Any, title: str) -> str:
    plt = pyplot()
    buf = io.StringIO()
    with plt.rc_context({"svg.fonttype": "none"}):
        fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None, "Title": title})
    plt.close(fig)
    text = buf.getvalue()
    text = text[text.find("<svg") :] if "<svg" in text else text
    return re.sub(r"\s*<metadata>.*?</metadata>", "", text, flags=re.S)
