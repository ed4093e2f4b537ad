"""A whole synthetic study, end to end, through the services and views the web uses.

`demo_study_build` imports generated ideas (seven sections, each with a known quality
and a condition effect), normalises them against the local OpenAI-compatible test
server over HTTP and signs every rewrite off, invites, profiles, screens and assigns
reviewers with the solver, enters their reviews and pair ratings through the reviewer
views with Django's test client (scores drawn from the known effects plus reviewer and
residual noise), runs a direct and a pairwise judge against the test server and the
random baseline, builds the report and the package, and checks that the simulated
effects come out of the report. `manage.py demo_study` is a thin wrapper.

The scripted server and the judge runs are judging's: the demo asks the `DemoJudging`
registered in `studies.demo_judging` (from `JudgingConfig.ready()`). With none
registered the demo needs a `base_url` and runs no judges.

Better ideas are written longer, so the test server's pairwise judge ("the longer text
wins") tracks the human ratings; its direct scores are a hash of the text and do not.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.test import Client, override_settings
from django.urls import reverse

from llm.models import JudgeConfig
from llm.services import judge_config_create, judge_config_update

from . import services
from .analysis.report import ReportOptions
from .demo_judging import DemoJudgeOutcome, demo_judging
from .models import Assignment, Idea, JobRun, PairTask, Reviewer, Study, StudyReport
from .protocol.template import render_sections
from .report_files import report_build
from .services.study import study_create
from .storage import report_file_open

HUMAN, AI = "Human", "AI"
TOPICS = ("Factuality", "Reasoning")
# The simulated AI − human difference per metric, on the 1–10 scale.
EFFECTS = {
    "novelty": 1.5,
    "excitement": 1.2,
    "feasibility": -0.4,
    "effectiveness": 0.6,
    "overall": 1.0,
}
IDEA_SD, REVIEWER_SD, RESIDUAL_SD = 0.6, 0.4, 0.8
BASE = 5.0
# How far the report's difference may sit from the simulated one before the check fails.
TOLERANCE = 0.8
P_MAX = 0.05
CHECKED_METRICS = ("novelty", "overall")


class DemoError(Exception):
    """The demo cannot be built as asked; the message says why."""


@dataclass
class Check:
    name: str
    passed: bool
    detail: str


@dataclass
class DemoResult:
    study: Study
    report: StudyReport
    where: str
    checks: list[Check] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    judge_runs: list[DemoJudgeOutcome] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.passed for c in self.checks)

    def summary(self) -> list[str]:
        lines = [
            f"study {self.study.slug}: " + ", ".join(f"{v} {k}" for k, v in self.counts.items()),
            f"report and package in {self.where}",
        ]
        for run in self.judge_runs:
            lines.append(f"judge {run.method}: {run.status} ({run.message})")
        for c in self.checks:
            lines.append(f"[{'ok' if c.passed else 'FAIL'}] {c.name}: {c.detail}")
        return lines


# --------------------------------------------------------------------------- synthetic data


@dataclass
class _SynthIdea:
    external_id: str
    topic: str
    condition: str
    quality: float  # the idea's own quality, in score points
    text: str = ""


FILLER = [
    "Each step is logged so that failures can be traced back to their cause.",
    "The comparison uses the same prompts and the same budget for every system.",
    "Results are broken down by question type to show where the gain comes from.",
    "A small pilot checks that the annotation guidelines are followed consistently.",
    "Ablations remove one component at a time to measure its contribution.",
    "Error cases are collected and grouped by hand into a short taxonomy.",
]


def _idea_text(idea: _SynthIdea, n: int) -> str:
    # Length carries the quality signal (see the module docstring).
    lift = idea.quality + (EFFECTS["overall"] if idea.condition == AI else 0.0)
    extra = max(1, round(4 + 2.5 * lift))
    method = "Prompt the model to draft an answer, then check each claim against retrieved "
    method += f"evidence for {idea.topic.lower()} problems. "
    method += " ".join(FILLER[k % len(FILLER)] for k in range(extra))
    return render_sections(
        {
            "title": f"Checked drafting for {idea.topic.lower()}, variant {n}",
            "problem_statement": f"Language models make {idea.topic.lower()} errors that "
            "users cannot spot.",
            "motivation": "Existing methods check answers only at the end, when errors "
            "have already compounded.",
            "proposed_method": method,
            "experiment_plan": "1. Collect benchmark questions. 2. Run the baseline. "
            "3. Run the method. 4. Compare accuracy per category.",
            "test_cases": "Input: a question whose baseline answer has one false claim. "
            "Expected: the method removes the claim.",
            "fallback_plan": "If the checks do not help, analyse which claims they miss.",
        }
    )


def _synth_ideas(per_condition: int, rng: random.Random) -> list[_SynthIdea]:
    ideas: list[_SynthIdea] = []
    for cond in (HUMAN, AI):
        for k in range(per_condition):
            idea = _SynthIdea(
                external_id=f"demo-{cond.lower()}-{k + 1:02d}",
                topic=TOPICS[k % len(TOPICS)],
                condition=cond,
                quality=rng.gauss(0, IDEA_SD),
            )
            ideas.append(idea)
    # Centred per condition, so the conditions differ by the simulated effect exactly and
    # only reviewer and residual noise stand between it and the report.
    for cond in (HUMAN, AI):
        group = [i for i in ideas if i.condition == cond]
        mean = sum(i.quality for i in group) / len(group)
        for i in group:
            i.quality -= mean
    for n, idea in enumerate(ideas, start=1):
        idea.text = _idea_text(idea, n)
    return ideas


def _score(true: float, rng: random.Random) -> int:
    return int(min(10, max(1, round(true + rng.gauss(0, RESIDUAL_SD)))))


def _true_score(idea: _SynthIdea, metric: str, bias: float) -> float:
    effect = EFFECTS.get(metric, 0.0) if idea.condition == AI else 0.0
    return BASE + idea.quality + effect + bias


# --------------------------------------------------------------------------- the build


@contextlib.contextmanager
def _quiet_and_eager() -> Iterator[None]:
    """Mail stays in memory (no console flood of invitations), the test client's host is
    allowed, and Celery tasks enqueued on commit run here, in order, not on a worker."""
    from django.conf import settings

    from ideareview.celery import app

    saved = (app.conf.task_always_eager, app.conf.task_eager_propagates)
    app.conf.task_always_eager = True
    app.conf.task_eager_propagates = True
    hosts = [*settings.ALLOWED_HOSTS, "testserver"]
    try:
        with override_settings(
            EMAIL_BACKEND="django.core.mail.backends.locmem.EmailBackend", ALLOWED_HOSTS=hosts
        ):
            yield
    finally:
        app.conf.task_always_eager, app.conf.task_eager_propagates = saved


def demo_study_build(
    *,
    slug: str = "demo-study",
    ideas_per_condition: int = 10,
    reviewers: int = 10,
    seed: int = 1,
    base_url: str | None = None,
    out_dir: Path | None = None,
    report_options: ReportOptions | None = None,
    echo: Callable[[str], None] | None = None,
) -> DemoResult:
    """Build the demo study; refuses if `slug` exists. Without `base_url` the local test
    server is started on a free port for the duration of the build."""
    if Study.objects.filter(slug=slug).exists():
        raise DemoError(
            f"a study {slug!r} exists already: delete it (admin) or choose another --slug"
        )
    if ideas_per_condition < 2:
        raise DemoError("--ideas-per-condition must be at least 2")
    if reviewers < 2:
        raise DemoError("--reviewers must be at least 2")
    if base_url is None:
        judging = demo_judging()
        if judging is None:
            raise DemoError(
                "no scripted LLM server to start (the judging app provides it): pass base_url"
            )
        with judging.scripted_server() as server_url:
            return demo_study_build(
                slug=slug,
                ideas_per_condition=ideas_per_condition,
                reviewers=reviewers,
                seed=seed,
                base_url=server_url,
                out_dir=out_dir,
                report_options=report_options,
                echo=echo,
            )
    say = echo or (lambda _line: None)
    with _quiet_and_eager():
        return _build(
            slug=slug,
            per_condition=ideas_per_condition,
            n_reviewers=reviewers,
            seed=seed,
            base_url=base_url,
            out_dir=out_dir,
            options=report_options,
            say=say,
        )


def _owner() -> Any:
    User = get_user_model()
    owner, created = User.objects.get_or_create(username="demo-owner")
    if created:
        owner.set_unusable_password()
        owner.save(update_fields=["password"])
    return owner


def _user_of(reviewer: Reviewer) -> Any:
    if reviewer.user is None:
        raise DemoError(f"reviewer {reviewer.pseudonym} has no account")
    return reviewer.user


def _config(base_url: str, study: Study, owner: Any) -> JudgeConfig:
    name = f"demo test server ({study.slug})"
    fields = dict(
        base_url=base_url,
        model="scripted-1",
        # the researcher's own endpoint (loopback, allowed with DEBUG on or when listed),
        # with no key: the scripted server needs none
        api_key_env="",
        provider="",
        endpoint_key=None,
        disabled_reason="",
        parameters={"temperature": 0},
        concurrency=4,
        timeout_seconds=10,
        max_attempts=3,
        backoff_seconds=0.01,
    )
    config = JudgeConfig.objects.filter(study=study, name=name).first()
    if config is not None:
        # The server's port changes from run to run.
        return judge_config_update(config=config, actor=owner, **fields)
    return judge_config_create(name=name, study=study, actor=owner, **fields)


def _build(
    *,
    slug: str,
    per_condition: int,
    n_reviewers: int,
    seed: int,
    base_url: str,
    out_dir: Path | None,
    options: ReportOptions | None,
    say: Callable[[str], None],
) -> DemoResult:
    """The study's stages in the order a researcher meets them; one random stream, drawn
    from in this order, so a seed gives the same study."""
    rng = random.Random(seed)
    owner = _owner()
    load = min(7, max(2, math.ceil(3 * 2 * per_condition / n_reviewers)))
    study = _demo_study(slug=slug, owner=owner, load=load)
    truth = _demo_ideas(study=study, owner=owner, per_condition=per_condition, rng=rng)
    say(f"imported {len(truth)} ideas")
    config = _config(base_url, study, owner)
    say(f"normalised and approved: {_demo_normalize(study=study, owner=owner, config=config)}")
    biases = _demo_reviewers(
        study=study, owner=owner, slug=slug, n_reviewers=n_reviewers, load=load, rng=rng
    )
    screened = services.reviewers_screen_by_rule(study=study, actor=owner)
    say(f"{screened} reviewers screened in")
    preview, result, _ = services.assignment_preview(study=study, seed=seed, actor=owner)
    if not result.feasible:
        raise DemoError("no feasible assignment: " + result.explanation())
    services.assignment_commit(study=study, job=preview, actor=owner)
    services.study_open_for_review(study=study, actor=owner)
    study.refresh_from_db()
    client = Client()
    submitted = _demo_reviews(study=study, client=client, truth=truth, biases=biases, rng=rng)
    services.pair_tasks_create(
        study=study, per_reviewer=2, condition_a=HUMAN, condition_b=AI, seed=seed, actor=owner
    )
    rated = _demo_pair_ratings(study=study, client=client, truth=truth, rng=rng)
    client.logout()
    say(f"{submitted} reviews and {rated} pair ratings entered over HTTP")
    judging = demo_judging()
    runs = (
        []
        if judging is None
        else judging.judges_run(study=study, owner=owner, config=config, say=say)
    )
    snapshot = report_build(
        study=study, out_dir=out_dir, options=options or _demo_report_options(seed), echo=None
    )
    where = str(out_dir) if out_dir else f"{snapshot.directory} in the reports storage"
    say(f"report built in {snapshot.data.get('timing_seconds')} s")
    counts = {
        "ideas": len(truth),
        "reviewers": Reviewer.objects.filter(study=study).count(),
        "reviews": submitted,
        "pair ratings": rated,
    }
    demo = DemoResult(study=study, report=snapshot, where=where, counts=counts, judge_runs=runs)
    demo.checks = demo_checks(snapshot.directory, runs)
    return demo


def _demo_study(*, slug: str, owner: Any, load: int) -> Study:
    study = study_create(
        owner=owner, slug=slug, title="Demo study (synthetic)", baseline_condition=HUMAN
    )
    study.min_reviews_per_idea, study.max_reviews_per_idea = 2, 4
    study.min_load, study.max_load = 2, max(load, 2)
    study.save()
    return study


def _demo_ideas(
    *, study: Study, owner: Any, per_condition: int, rng: random.Random
) -> dict[int, _SynthIdea]:
    """Topics and conditions, then one pasted proposal at a time; each stored idea's
    synthetic truth, by idea id."""
    for name in TOPICS:
        services.topic_add(study=study, name=name, actor=owner)
    services.condition_add(study=study, key=HUMAN, kind="human", actor=owner)
    services.condition_add(study=study, key=AI, kind="ai", actor=owner)
    # The story: its proposals were written by gpt-4o (the team sees this, reviewers never).
    services.condition_set_generating_model(study=study, key=AI, model="gpt-4o", actor=owner)
    synth = _synth_ideas(per_condition, rng)
    for s in synth:
        batch = services.ideas_read_pasted(
            study=study,
            text=s.text,
            external_id=s.external_id,
            topic=s.topic,
            conditions=[s.condition],
        )
        services.ideas_import(
            study=study, batch=batch, source=f"pasted {s.external_id}", actor=owner
        )
    by_external = {s.external_id: s for s in synth}
    truth: dict[int, _SynthIdea] = {}
    for idea in Idea.objects.filter(study=study).prefetch_related("memberships"):
        truth[idea.pk] = by_external[idea.memberships.all()[0].external_id]
    return truth


def _demo_normalize(*, study: Study, owner: Any, config: JudgeConfig) -> str:
    """Normalization over HTTP, then the owner's sign-off of every rewrite; the job's
    closing message."""
    services.normalization_config_choose(study=study, config=config, actor=owner)
    job = services.normalization_enqueue(study=study, actor=owner)
    job.refresh_from_db()
    if job.status in (JobRun.Status.QUEUED, JobRun.Status.RUNNING):
        # Inside an outer transaction (a test) on_commit has not fired: run it here.
        from .tasks import normalize_ideas

        normalize_ideas(job.pk)
        job.refresh_from_db()
    if job.status != JobRun.Status.DONE:
        raise DemoError(f"normalization failed: {job.message} {job.error}".strip())
    for idea_id in services.signoff_queue(study):
        services.normalization_approve(idea=Idea.objects.get(pk=idea_id), actor=owner)
    return job.message


def _demo_reviewers(
    *, study: Study, owner: Any, slug: str, n_reviewers: int, load: int, rng: random.Random
) -> dict[int, float]:
    """Reviewers invited, accepted, consented and profiled; each one's bias, by id."""
    User = get_user_model()
    biases: dict[int, float] = {}
    for j in range(n_reviewers):
        email = f"demo-reviewer-{j + 1:02d}@{slug}.example.org"
        invitation = services.invitation_create(
            study=study, email=email, name=f"Demo reviewer {j + 1}", actor=owner
        )
        user = User(username=email, email=email)
        user.set_unusable_password()  # synthetic people never log in
        user.save()
        reviewer = services.invitation_accept(
            token=services.invitation_token(invitation), user=user
        )
        services.reviewer_consent(reviewer=reviewer)
        services.reviewer_profile_save(
            reviewer=reviewer,
            data={
                "institution": f"Demo Lab {j + 1}",
                "position": "Postdoc",
                "major_venue_papers": 2 + j % 3,
                "topic_first": TOPICS[j % 2],
                "topic_second": TOPICS[(j + 1) % 2],
                "preferred_load": load,
            },
        )
        biases[reviewer.pk] = rng.gauss(0, REVIEWER_SD)
    return biases


def _demo_reviews(
    *,
    study: Study,
    client: Client,
    truth: dict[int, _SynthIdea],
    biases: dict[int, float],
    rng: random.Random,
) -> int:
    """Every assignment reviewed through the reviewer's own pages; how many."""
    metrics = study.form_definition().metric_keys
    submitted = 0
    assignments = Assignment.objects.filter(study=study).select_related("reviewer__user")
    for a in assignments.order_by("reviewer_id", "pk"):
        client.force_login(_user_of(a.reviewer))
        client.get(reverse("studies:review_page", args=[a.pk]))
        known = truth[a.idea_id]
        bias = biases[a.reviewer_id]
        data: dict[str, str] = {}
        for m in metrics:
            data[m] = str(_score(_true_score(known, m, bias), rng))
            data[f"{m}_rationale"] = _demo_rationale(submitted)
        # Time on the review as a reviewer would spend it (the demo's clicks take none);
        # not drawn from `rng`, so the scores stay those of earlier demos.
        Assignment.objects.filter(pk=a.pk).update(active_seconds=60.0 * (12 + (a.pk * 7) % 25))
        data.update(familiarity="3", confidence="4", minutes=str(20 + rng.randrange(30)))
        response = client.post(reverse("studies:review_submit", args=[a.pk]), data)
        if response.status_code != 302:
            raise DemoError(f"review submit for assignment {a.pk}: HTTP {response.status_code}")
        submitted += 1
    return submitted


# The demo's rationales: each review gets its own pair of these sentences (the same for
# its metrics), so no two reviews' rationales are near-duplicates under the default
# quality plan (docs/quality.md); the pair (10, 16) is left out, as its embedding is
# within cosine 0.95 of two others.
_DEMO_SENTENCES = (
    "The plan is concrete, and every experiment it lists could be run on public benchmarks.",
    "I doubt that the chosen baseline is strong enough to show a real gain here.",
    "The motivation points to a genuine and well documented failure of current prompting methods.",
    "Step three of the plan needs far more compute than the stated constraints would allow.",
    "A similar approach appeared last year, although it was applied to machine translation instead.",
    "The fallback plan is thoughtful, and even a negative result would still yield a paper.",
    "The evaluation relies on a single automatic metric that a clever system could game easily.",
    "The worked test cases make the behaviour the authors expect very easy to picture.",
    "It stays unclear how the critique prompt avoids repeating the very errors of the draft.",
    "If it worked, this would change the way people build their retrieval pipelines today.",
    "The proposal quietly skips the real cost of annotating the new dataset it relies on.",
    "Results on several low-resource languages would make the whole argument far more convincing.",
    "A human evaluation is planned, but its protocol and its annotators are never described.",
    "The ablations that are listed would cleanly isolate which of the components actually matters.",
    "An error analysis is promised, yet not a single category of error is defined anywhere.",
    "Latency and cost at inference time are never discussed, although both seem to be high.",
    "Overall this is a fair idea, and there is clear room left to improve it further.",
    "I would very much like to see the same method tried on code generation as well.",
    "With a stronger and broader evaluation this could become a solid workshop paper at least.",
    "My score mostly reflects the gap between the ambition of the idea and its plan.",
    "The writing is clear and well organised, which made my judgement of it much easier.",
    "I am fairly sure of my reading of the method, having worked on related problems.",
    "A small pilot on a subset of the data would settle most of the doubts I have.",
    "The risks are named honestly and early, which I appreciate in a proposal like this.",
)
_DEMO_PAIRS = [p for p in itertools.combinations(range(len(_DEMO_SENTENCES)), 2) if p != (10, 16)]


def _demo_rationale(n: int) -> str:
    """The rationale of the demo's `n`-th review (about 30 words)."""
    i, j = _DEMO_PAIRS[n % len(_DEMO_PAIRS)]
    return f"{_DEMO_SENTENCES[i]} {_DEMO_SENTENCES[j]}"


def _demo_pair_ratings(
    *, study: Study, client: Client, truth: dict[int, _SynthIdea], rng: random.Random
) -> int:
    """Every pair task rated through the reviewer's pages, following the true scores."""
    rated = 0
    tasks = PairTask.objects.filter(study=study).select_related(
        "reviewer__user", "idea_a", "idea_b"
    )
    for task in tasks.order_by("reviewer_id", "pk"):
        client.force_login(_user_of(task.reviewer))
        client.get(reverse("studies:pair_page", args=[task.pk]))
        left, right = truth[task.left.pk], truth[task.right.pk]
        choices: dict[str, str] = {}
        for d in task.dimensions:
            gap = _true_score(left, d, 0) - _true_score(right, d, 0) + rng.gauss(0, RESIDUAL_SD)
            choices[d] = "first" if gap > 0.3 else "second" if gap < -0.3 else "tie"
        response = client.post(reverse("studies:pair_submit", args=[task.pk]), choices)
        if response.status_code != 302:
            raise DemoError(f"pair submit for task {task.pk}: HTTP {response.status_code}")
        rated += 1
    return rated


def _demo_report_options(seed: int) -> ReportOptions:
    return ReportOptions(
        consistency_splits=200,
        consistency_bootstrap=200,
        consistency_permutations=200,
        seed=seed,
        mixed_starts=1,
        agreement_splits=100,
        agreement_bootstrap=100,
        agreement_permutations=100,
    )


PAIRWISE_RHO_MIN = 0.3


def _pairwise_check(agreement: dict[str, Any]) -> Check:
    """Better ideas are longer and the test server's pairwise judge prefers the longer
    text, so its ranking must follow the human means (its direct scores are a hash)."""
    name = "pairwise judge vs human overall (Spearman)"
    for judge in agreement.get("judges") or []:
        if judge.get("method") != "pairwise":
            continue
        try:
            by_metric = judge["result"]["absolute"]["by_metric"]
            rho = float(by_metric["overall"]["spearman"]["estimate"])
        except (KeyError, TypeError, ValueError):
            return Check(name, False, "no Spearman for overall in the agreement section")
        return Check(name, rho >= PAIRWISE_RHO_MIN, f"ρ = {rho:.2f} (must be ≥ {PAIRWISE_RHO_MIN})")
    return Check(name, False, "the agreement section has no pairwise judge")


def _stored(version: str, name: str) -> bytes | None:
    document = report_file_open(version, name)
    if document is None:
        return None
    with document:
        return bytes(document.read())


def demo_checks(version: str, runs: list[DemoJudgeOutcome]) -> list[Check]:
    """Do the simulated effects show up in the report's files (`version` in the reports
    storage)? (The judges' checks only when judges ran.)"""
    raw = _stored(version, "report.json")
    if raw is None:
        return [Check("files", False, f"no report.json in {version}")]
    report = json.loads(raw)
    checks: list[Check] = []
    comparisons = {(c["metric"], c["condition"]): c for c in report["by_review"]["comparisons"]}
    for metric in CHECKED_METRICS:
        c = comparisons.get((metric, AI))
        if c is None:
            checks.append(Check(f"{metric} difference", False, "missing from report.json"))
            continue
        diff = c["mean"] - c["mean_baseline"]
        checks.append(
            Check(
                f"{metric}: AI − Human mean",
                abs(diff - EFFECTS[metric]) <= TOLERANCE,
                f"{diff:+.2f} (simulated {EFFECTS[metric]:+.2f}, tolerance {TOLERANCE})",
            )
        )
        checks.append(
            Check(
                f"{metric}: Test 1 p-value",
                c["p_two_sided"] < P_MAX,
                f"p = {c['p_two_sided']:.2g} (must be < {P_MAX}), n = {c['n']} vs {c['n_baseline']}",
            )
        )
    if runs:
        checks.append(
            Check(
                "judges finished",
                all(r.finished for r in runs),
                ", ".join(f"{r.method} {r.status}" for r in runs),
            )
        )
        checks.append(_pairwise_check(report.get("agreement") or {}))
    missing = [
        n for n in ("report.json", "report.html", "package.zip") if _stored(version, n) is None
    ]
    checks.append(
        Check("files", not missing, "missing: " + ", ".join(missing) if missing else "all present")
    )
    return checks
