"""Judging's part of the demo study (`studies.demo_judging` defines the interface;
`JudgingConfig.ready()` registers `DEMO_JUDGING`): the scripted test server the build
normalises and judges against, and the demo's judges — a direct and a pairwise judge
over HTTP, each asking a fifth of its prompts again, a panel of the direct judge and a
second one (another model at the same server), then the random baseline — each run to
the end.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from llm.models import JudgeConfig
from llm.services import judge_config_create, judge_config_update
from studies.demo_judging import DemoJudgeOutcome
from studies.models import Study

from .models import JudgeRun
from .services import judge_run_create, judge_run_execute
from .testserver import Rules, TestServer

# (method, whether it calls the LLM), in the order the demo runs them.
DEMO_METHODS = (("direct", True), ("pairwise", True), ("baseline_random", False))
DEMO_REPEAT_SHARE = 0.2
# The panel run's second judge: another of the scripted server's models.
DEMO_PANEL_METHOD = "direct"
DEMO_SECOND_MODEL = "scripted-2"


def _second_judge(config: JudgeConfig, study: Study, owner: Any) -> JudgeConfig:
    """The panel's second member: the first judge's endpoint and settings, another model
    (two judges asking the same model would give the same answers)."""
    name = f"{config.name}, second judge"
    fields = dict(
        base_url=config.base_url,
        model=DEMO_SECOND_MODEL,
        api_key_env=config.api_key_env,
        provider=config.provider,
        endpoint_key=config.endpoint_key,
        disabled_reason="",
        parameters=dict(config.parameters),
        concurrency=config.concurrency,
        timeout_seconds=config.timeout_seconds,
        max_attempts=config.max_attempts,
        backoff_seconds=config.backoff_seconds,
    )
    second = JudgeConfig.objects.filter(study=study, name=name).first()
    if second is not None:
        return judge_config_update(config=second, actor=owner, **fields)
    return judge_config_create(name=name, study=study, actor=owner, **fields)


class ScriptedDemoJudging:
    @contextlib.contextmanager
    def scripted_server(self) -> Iterator[str]:
        with TestServer(Rules()) as server:
            yield server.base_url

    def judges_run(
        self, *, study: Study, owner: Any, config: JudgeConfig, say: Callable[[str], None]
    ) -> list[DemoJudgeOutcome]:
        asks: list[tuple[str, dict[str, Any]]] = []
        for method, calls_llm in DEMO_METHODS:
            # A fifth of the prompts asked again: the run page's repetition figures.
            params = {"repeat_share": DEMO_REPEAT_SHARE} if calls_llm else None
            asks.append((method, {"config": config if calls_llm else None, "params": params}))
            if method == DEMO_PANEL_METHOD:
                # The panel's run page, and the report's panel beside its members.
                second = _second_judge(config, study, owner)
                asks.append((f"{method} panel", {"config": config, "panel": [second]}))
        outcomes = []
        for label, fields in asks:
            method = label.split()[0]
            run = judge_run_create(study=study, method=method, actor=owner, **fields)
            run = judge_run_execute(run=run)
            say(f"judge {label}: {run.status}")
            outcomes.append(
                DemoJudgeOutcome(
                    method=label,
                    status=run.status,
                    message=run.message,
                    finished=run.status == JudgeRun.Status.DONE,
                )
            )
        return outcomes


DEMO_JUDGING = ScriptedDemoJudging()
