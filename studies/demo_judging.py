"""The demo study's judging part, through an interface studies defines.

The demo (`studies.demo`) normalises and judges against a local scripted LLM server and
runs a few judges on its study; both are judging's. Judging registers its `DemoJudging`
when it starts (`AppConfig.ready`; docs/architecture.md, "Interfaces studies defines").
With none registered the demo must be given a server's URL and runs no judges. A module
of its own, so that registering does not import the demo (and Django's test client) into
every process.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from llm.models import JudgeConfig

    from .models import Study


@dataclass(frozen=True)
class DemoJudgeOutcome:
    """One judge run the demo made, as its summary and checks read it."""

    method: str
    status: str
    message: str
    finished: bool  # the run completed


class DemoJudging(Protocol):
    def scripted_server(self) -> AbstractContextManager[str]:
        """A local OpenAI-compatible server with scripted answers, for the build's
        normalization and judges; entering it gives its base URL."""
        ...

    def judges_run(
        self, *, study: Study, owner: Any, config: JudgeConfig, say: Callable[[str], None]
    ) -> list[DemoJudgeOutcome]:
        """Run the demo's judges on the study to the end; one outcome per run."""
        ...


_judging: list[DemoJudging] = []


def demo_judging_register(judging: DemoJudging) -> None:
    """Install the demo's judging part (the last registered one answers; registering the
    same one again is a no-op, so a repeated `ready()` does not duplicate it)."""
    if judging not in _judging:
        _judging.append(judging)


def demo_judging() -> DemoJudging | None:
    return _judging[-1] if _judging else None
