"""The reproducibility package's `judges/` folder: every judge run of the study (not the
validation runs, which judge no study ideas) with its method, parameters, judge and cost,
its cached LLM calls, its judgments, pairwise outcomes and ratings under the package's
pseudonyms, and every prompt template with its hash. `studies.package` defines the
section interface; `JudgingConfig.ready()` registers `judges_section`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from llm.models import LLMCall
from studies.package import PackageWriter, Pseudonyms

from .methods import prompts
from .models import IdeaRating, JudgeRun, Judgment, PairwiseOutcome


def judges_section(out: PackageWriter) -> None:
    p, name = out.pseudonyms, out.idea_names
    runs = list(
        JudgeRun.objects.filter(study=out.study)
        .exclude(method=JudgeRun.Method.VALIDATION)
        .select_related("config")
        .order_by("created_at", "pk")
    )
    meta, judgments, outcomes, ratings = [], [], [], []
    call_ids: set[int] = set()
    for run in runs:
        key = p.run(run.pk)
        meta.append(_run_meta(run, key, name))
        rows = _run_rows(run, key, name, call_ids)
        judgments += rows[0]
        outcomes += rows[1]
        ratings += rows[2]
    calls = LLMCall.objects.filter(pk__in=call_ids) | LLMCall.objects.filter(run__in=runs)
    lines, used_versions = _call_lines(calls.distinct().order_by("pk"), p)
    out.json("runs.json", meta)
    out.json(
        "prompts.json",
        {
            "hash": "prompt_hash of a call = SHA-256 of its messages as canonical JSON "
            "(sorted keys, no spaces, UTF-8); template_sha256 = SHA-256 of the template",
            "templates": _prompt_templates(used_versions),
        },
    )
    out.text("calls.jsonl", "\n".join(lines) + ("\n" if lines else ""))
    out.csv(
        "judgments.csv",
        judgments,
        ["run", "idea", "metric", "sample", "member", "score", "call", "parse_error"],
    )
    out.csv(
        "pairwise_outcomes.csv",
        outcomes,
        [
            "run",
            "idea_a",
            "idea_b",
            "first_shown",
            "dimension",
            "round",
            "member",
            "verdict",
            "call",
        ],
    )
    out.csv("ratings.csv", ratings, ["run", "idea", "dimension", "score", "ci_low", "ci_high"])


def _run_meta(run: JudgeRun, key: str, name: dict[Any, str]) -> dict[str, Any]:
    """A judge run as the package describes it: method, parameters, judge, counts, cost."""
    cfg = run.config
    params = dict(run.params)
    for k in ("idea_ids",):
        if params.get(k):
            params[k] = sorted(name.get(i, "?") for i in params[k])
    return {
        "run": key,
        "method": run.method,
        "baseline": run.method_is_baseline,
        "status": run.status,
        "params": params,
        "model": cfg.resolved_model() if cfg and not run.method_is_baseline else None,
        "judge": None
        if cfg is None
        else {
            "name": cfg.name,
            "parameters": cfg.parameters,
            "price_input_per_million": str(cfg.price_input_per_million),
            "price_output_per_million": str(cfg.price_output_per_million),
        },
        # A panel run's further judges, by seat (a judgment's `member`; 0 is `judge`).
        "panel": [
            {"seat": m.seat, "name": m.config.name, "model": m.config.resolved_model()}
            for m in run.panel_members.select_related("config")
        ],
        "calls_paid": run.http_calls,
        "cache_hits": run.cache_hits,
        "unparseable": run.unparseable,
        "cost": str(run.cost),
        "summary": run.summary,
        "finished_at": run.finished_at,
    }


def _run_rows(
    run: JudgeRun, key: str, name: dict[Any, str], call_ids: set[int]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """A run's judgments, pairwise outcomes and ratings under pseudonyms; the calls they
    cite are added to `call_ids`."""
    judgments, outcomes, ratings = [], [], []
    for j in Judgment.objects.filter(run=run):
        judgments.append(
            {
                "run": key,
                "idea": name.get(j.idea_id),
                "metric": j.metric,
                "sample": j.sample,
                "member": j.member,
                "score": j.score,
                "call": j.call_id,
                "parse_error": j.parse_error,
            }
        )
        if j.call_id:
            call_ids.add(j.call_id)
    for o in PairwiseOutcome.objects.filter(run=run):
        outcomes.append(
            {
                "run": key,
                "idea_a": name.get(o.idea_a_id),
                "idea_b": name.get(o.idea_b_id),
                "first_shown": name.get(o.first_shown_id),
                "dimension": o.dimension,
                "round": o.round,
                "member": o.member,
                "verdict": o.verdict,
                "call": o.call_id,
            }
        )
        if o.call_id:
            call_ids.add(o.call_id)
    for r in IdeaRating.objects.filter(run=run):
        ratings.append(
            {
                "run": key,
                "idea": name.get(r.idea_id),
                "dimension": r.dimension,
                "score": r.score,
                "ci_low": r.ci_low,
                "ci_high": r.ci_high,
            }
        )
    return judgments, outcomes, ratings


def _call_lines(calls: Iterable[LLMCall], p: Pseudonyms) -> tuple[list[str], set[str]]:
    """Each LLM call as one JSON line, and the prompt versions the calls used."""
    lines, used_versions = [], set()
    for c in calls:
        used_versions.add(c.prompt_version)
        lines.append(
            json.dumps(
                {
                    "call": c.pk,
                    "run": p.run(c.run_id) if c.run_id else None,
                    "cache_key": c.cache_key,
                    "model": c.model,
                    "prompt_version": c.prompt_version,
                    "prompt_hash": c.prompt_hash,
                    "request": c.request,
                    "response_text": c.response_text,
                    "response": c.response,
                    "parsed": c.parsed,
                    "parse_error": c.parse_error,
                    "input_tokens": c.input_tokens,
                    "output_tokens": c.output_tokens,
                    "reasoning_tokens": c.reasoning_tokens,
                    "response_model": c.response_model,
                    "system_fingerprint": c.system_fingerprint,
                    "latency_ms": c.latency_ms,
                    "cost": str(c.cost),
                    "error": c.error,
                },
                ensure_ascii=False,
                default=str,
            )
        )
    return lines, used_versions


def _prompt_templates(used_versions: set[str]) -> dict[str, dict[str, Any]]:
    """Every prompt template with its hash, marked when this study's calls used it."""
    templates = {}
    for obj in vars(prompts).values():
        if isinstance(obj, prompts.PromptTemplate):
            body = json.dumps({"system": obj.system, "user": obj.user}, sort_keys=True)
            templates[obj.id] = {
                "name": obj.name,
                "version": obj.version,
                "system": obj.system,
                "user": obj.user,
                "template_sha256": hashlib.sha256(body.encode()).hexdigest(),
                "used_by_this_study": obj.id in used_versions,
            }
    return templates
