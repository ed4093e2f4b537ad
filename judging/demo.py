"""Judging's part of the demo study (`studies.demo_judging` defines the interface;
`JudgingConfig.ready()` registers `DEMO_JUDGING`): the scripted test server the build
normalises and judges against, and the demo's judges — a direct and a pairwise judge
over HTTP, each asking a fifth of its prompts again, then the random baseline — each run
to the end.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from llm.models import JudgeConfig
from studies.demo_judging import DemoJudgeOutcome
from studies.models import Study

from .models import JudgeRun
from .services import judge_run_create, judge_run_execute
from .testserver import Rules, TestServer

# (method, whether it calls the LLM), in the order the demo runs them.
DEMO_METHODS = (("direct", True), ("pairwise", True), ("baseline_random", False))
DEMO_REPEAT_SHARE = 0.2


class ScriptedDemoJudging:
    @contextlib.contextmanager
    def scripted_server(self) -> Iterator[str]:
        with TestServer(Rules()) as server:
            yield server.base_url

    def judges_run(
        self, *, study: Study, owner: Any, config: JudgeConfig, say: Callable[[str], None]
    ) -> list[DemoJudgeOutcome]:
        outcomes = []
        for method, calls_llm in DEMO_METHODS:
            run = judge_run_create(
                study=study,
                method=method,
                config=config if calls_llm else None,
                actor=owner,
                # A fifth of the prompts asked again: the run page's repetition figures.
                params={"repeat_share": DEMO_REPEAT_SHARE} if calls_llm else None,
            )
            run = judge_run_execute(run=run)
            say(f"judge {method}: {run.status}")
            outcomes.append(
                DemoJudgeOutcome(
                    method=run.method,
                    status=run.status,
                    message=run.message,
                    finished=run.status == JudgeRun.Status.DONE,
                )
            )
        return outcomes


DEMO_JUDGING = ScriptedDemoJudging()
