"""Judge runs: create, execute (resumably), cancel, resume.

Public API (keyword-only `<entity>_<action>` functions):

- `judge_config_create(name=..., study=..., base_url=..., model=..., ...)` → JudgeConfig
  of the study's team; `judge_configs_of(study)`: the judges its team sees and uses
- `judge_run_create(study=, method=, config=None, params=None, budget_calls=None,
  budget_cost=None, actor=None, panel=())` → JudgeRun (queued; `tasks.judge_run_enqueue`
  sends it); `panel`: more judges of the team asked every prompt (a panel run)
- `judge_run_execute(run=)` → JudgeRun: does the work in the calling process
- `judge_run_cancel(run=)`, `judge_run_resume(run=, force=False, budget=None,
  actor=None)` → JudgeRun (queued; the caller sends it): `budget` (a `RunBudget`)
  replaces the run's limits first
- `judge_run_mark_if_lost(run=)` → bool: a page marks a run whose worker died lost
- `judge_run_plan(study=, method=, params=)` → total units and the ideas a run would use
- `judge_run_textless_problem(study)` → why no method can judge the study's ideas when
  none has a text ("" when some has)
- `judge_run_results(run=)` → plain dict of ratings for views and the agreement report

The package: `runs` (the lifecycle above), `engine` (sending units and storing their
outcomes), `base` (what drivers share), `drivers/` (one module per method) and `ratings`
(the judge ratings studies' report asks for). What each method is — label, defaults,
LLM or baseline, corpus, agreement mapping — is its entry in `judging.methods.registry`.
"""

from llm.services import (
    JudgeConfigRefused,
    judge_config_create,
    judge_config_delete,
    judge_configs_of,
)
from studies.selectors import idea_text

from ..methods.registry import AUTO, CORPUS_METHODS, DEFAULT_PARAMS, LLM_METHODS
from .base import JudgeRunRefused, Unit
from .drivers.ligbench import LIGBENCH_NOVELTY, NOVELTY_LLM
from .engine import COMMIT_EVERY, PROGRESS_EVERY
from .runs import (
    RunBudget,
    judge_run_cancel,
    judge_run_create,
    judge_run_execute,
    judge_run_mark_if_lost,
    judge_run_plan,
    judge_run_results,
    judge_run_resume,
    judge_run_textless_problem,
)

__all__ = [
    "AUTO",
    "RunBudget",
    "COMMIT_EVERY",
    "CORPUS_METHODS",
    "DEFAULT_PARAMS",
    "LIGBENCH_NOVELTY",
    "LLM_METHODS",
    "NOVELTY_LLM",
    "PROGRESS_EVERY",
    "JudgeConfigRefused",
    "JudgeRunRefused",
    "Unit",
    "idea_text",
    "judge_config_create",
    "judge_config_delete",
    "judge_configs_of",
    "judge_run_cancel",
    "judge_run_create",
    "judge_run_execute",
    "judge_run_mark_if_lost",
    "judge_run_plan",
    "judge_run_resume",
    "judge_run_results",
    "judge_run_textless_problem",
]
