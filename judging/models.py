"""LLM judges: runs and what their calls decided.

Endpoint configs and the calls themselves live in the LLM layer (`llm`).
Workflows (creating, executing, resuming, cancelling runs) live in the `services`
package; the pure methods in `methods/`. The rows here are the single
source of truth for a run's progress: a crashed run is resumed from them, so counters on
`JudgeRun` are always recomputable from `LLMCall` and the outcome tables.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

from judging.methods.registry import BASELINE_METHODS, METHODS, method_label
from llm.models import JudgeConfig, LLMCall


def method_check() -> models.CheckConstraint:
    """The database's check that a run's method is a registered one, from the registry as
    it stands (a new entry changes it, and `makemigrations judging` writes the migration)."""
    return models.CheckConstraint(
        condition=models.Q(method__in=list(METHODS)), name="judge_run_method_valid"
    )


class JudgeRun(models.Model):
    # Values, labels, the baselines and the constraint below all come from the method
    # registry (judging/methods/registry.py): a new entry there changes them, and
    # `makemigrations judging` writes the migration. The run form's choices, the
    # baselines and the labels pages and the report show read the registry when asked.
    Method = models.TextChoices(  # type: ignore[call-overload]
        "Method", [(key.upper(), (key, spec.label)) for key, spec in METHODS.items()]
    )

    BASELINES = BASELINE_METHODS

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"
        BUDGET = "budget", "Stopped: budget reached"
        LOST = "lost", "Lost"

    ACTIVE = frozenset({Status.QUEUED, Status.RUNNING})

    study = models.ForeignKey("studies.Study", on_delete=models.CASCADE, related_name="judge_runs")
    # RESTRICT, not PROTECT: a judge in use cannot be deleted by itself, but deleting its
    # study takes the study's judges and runs together.
    config = models.ForeignKey(
        JudgeConfig, null=True, blank=True, on_delete=models.RESTRICT, related_name="runs"
    )
    method = models.CharField(max_length=32, choices=Method.choices)
    params = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    message = models.CharField(max_length=500, blank=True)
    error = models.TextField(blank=True)
    # Progress: units are calls to make (or outcomes to decide, for baselines).
    done_calls = models.PositiveIntegerField(default=0)
    total_calls = models.PositiveIntegerField(default=0)
    http_calls = models.PositiveIntegerField(default=0, help_text="Calls this run paid for.")
    cache_hits = models.PositiveIntegerField(default=0)
    errors = models.PositiveIntegerField(default=0, help_text="Calls that failed for good.")
    unparseable = models.PositiveIntegerField(default=0)
    cost = models.DecimalField(max_digits=14, decimal_places=6, default=Decimal("0"))
    budget_calls = models.PositiveIntegerField(null=True, blank=True)
    budget_cost = models.DecimalField(max_digits=14, decimal_places=6, null=True, blank=True)
    cancel_requested = models.BooleanField(default=False)
    summary = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The background-job lifecycle of studies.jobs, on this row: the lease token its worker
    # writes when it takes the run (every write of the worker is conditional on it), the
    # process that holds it ("node:pid", so the worker's main process can tell that its
    # pool process died), when a worker last took the run's message off the queue (a run
    # taken but never claimed is lost), and how many times a worker has taken it.
    lease = models.CharField(max_length=32, blank=True)
    worker = models.CharField(max_length=300, blank=True)
    received_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            method_check(),
            models.CheckConstraint(
                condition=models.Q(
                    status__in=[
                        "queued",
                        "running",
                        "done",
                        "failed",
                        "cancelled",
                        "budget",
                        "lost",
                    ]
                ),
                name="judge_run_status_valid",
            ),
        ]
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.method_label} run {self.pk} ({self.status})"

    def panel_configs(self) -> list[JudgeConfig]:
        """The judges asked by this run, member 0 (the run's own config) first; one for a
        run that is not a panel. A member's place in the list is its `Judgment.member`."""
        extra = [m.config for m in self.panel_members.select_related("config").order_by("seat")]
        return [self.config, *extra] if self.config is not None else extra

    @property
    def method_label(self) -> str:
        """The method's label in the registry."""
        return method_label(self.method)

    @property
    def method_is_baseline(self) -> bool:
        """A no-LLM baseline method (not `JudgeConfig.is_baseline`, the endpoint-less
        config such runs use)."""
        return self.method in self.BASELINES

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE

    @property
    def can_resume(self) -> bool:
        return self.status in {
            self.Status.FAILED,
            self.Status.CANCELLED,
            self.Status.BUDGET,
            self.Status.LOST,
            # a worker that died leaves its run "running" until a page marks it lost;
            # judge_run_resume takes it over only once its heartbeat is stale
            self.Status.RUNNING,
        } or (self.status == self.Status.DONE and self.done_calls < self.total_calls)

    @property
    def percent(self) -> int:
        if self.total_calls == 0:
            return 100 if self.status == self.Status.DONE else 0
        return min(100, int(100 * self.done_calls / self.total_calls))


class PanelMember(models.Model):
    """One more judge of a panel run: asked the same prompts as the run's own config.

    The run's own config is member 0; the members here sit at seats 1, 2, … in the order
    they were named, and a judgment names its member by that seat. RESTRICT, as for the
    run's config: a judge a panel used is not deleted alone."""

    run = models.ForeignKey(JudgeRun, on_delete=models.CASCADE, related_name="panel_members")
    config = models.ForeignKey(JudgeConfig, on_delete=models.RESTRICT, related_name="panel_seats")
    seat = models.PositiveSmallIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "seat"], name="unique_panel_seat"),
            models.UniqueConstraint(fields=["run", "config"], name="unique_panel_member"),
            models.CheckConstraint(condition=models.Q(seat__gte=1), name="panel_seat_positive"),
        ]
        ordering = ["run", "seat"]

    def __str__(self) -> str:
        return f"seat {self.seat} of run {self.run_id}: {self.config_id}"


class Judgment(models.Model):
    """An absolute score (direct or 1–5 mode). `score` None means the answer was unparseable.

    `member` is the panel seat of the judge that gave it (0: the run's own config)."""

    run = models.ForeignKey(JudgeRun, on_delete=models.CASCADE, related_name="judgments")
    member = models.PositiveSmallIntegerField(default=0)
    idea = models.ForeignKey("studies.Idea", on_delete=models.CASCADE, related_name="judgments")
    metric = models.CharField(max_length=64)
    score = models.FloatField(null=True, blank=True)
    rationale = models.TextField(blank=True)
    call = models.ForeignKey(
        LLMCall, null=True, blank=True, on_delete=models.SET_NULL, related_name="judgments"
    )
    sample = models.PositiveSmallIntegerField(default=0)
    parse_error = models.TextField(blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["run", "member", "idea", "metric", "sample"], name="unique_judgment"
            )
        ]
        ordering = ["run", "member", "idea", "metric", "sample"]

    def __str__(self) -> str:
        return f"{self.metric}={self.score} for idea {self.idea_id}"

    @property
    def unparseable(self) -> bool:
        return self.score is None


class PairwiseOutcome(models.Model):
    """One judged comparison of two ideas on one dimension.

    `idea_a`/`idea_b` are the pair in schedule order; `first_shown` is whichever of them
    the judge saw as "A". `verdict` is stated in terms of the fields, not of the display:
    "A" means `idea_a` won whichever side it was shown on. "unparseable" is its own
    verdict, never a win, a loss or a tie. `member` is the panel seat of the judge that
    gave it (0: the run's own config).
    """

    class Verdict(models.TextChoices):
        A = "A", "idea A won"
        B = "B", "idea B won"
        TIE = "tie", "Tie"
        UNPARSEABLE = "unparseable", "Unparseable"

    run = models.ForeignKey(JudgeRun, on_delete=models.CASCADE, related_name="outcomes")
    member = models.PositiveSmallIntegerField(default=0)
    idea_a = models.ForeignKey("studies.Idea", on_delete=models.CASCADE, related_name="+")
    idea_b = models.ForeignKey("studies.Idea", on_delete=models.CASCADE, related_name="+")
    first_shown = models.ForeignKey("studies.Idea", on_delete=models.CASCADE, related_name="+")
    dimension = models.CharField(max_length=64, default="overall")
    verdict = models.CharField(max_length=16, choices=Verdict.choices)
    round = models.PositiveSmallIntegerField(default=0, help_text="Swiss round; 0 otherwise.")
    call = models.ForeignKey(
        LLMCall, null=True, blank=True, on_delete=models.SET_NULL, related_name="outcomes"
    )
    parse_error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["run", "member", "round", "dimension", "idea_a", "idea_b", "first_shown"],
                name="unique_pairwise_outcome",
            ),
            models.CheckConstraint(
                condition=models.Q(verdict__in=["A", "B", "tie", "unparseable"]),
                name="pairwise_outcome_verdict_valid",
            ),
        ]
        ordering = ["run", "round", "id"]

    def __str__(self) -> str:
        return f"{self.idea_a_id} vs {self.idea_b_id}: {self.verdict}"

    @property
    def second_shown_id(self) -> int:
        return self.idea_b_id if self.first_shown_id == self.idea_a_id else self.idea_a_id

    def shown_winner(self) -> str | None:
        """The verdict as the judge gave it ("A" = shown first); None when unparseable."""
        if self.verdict == self.Verdict.UNPARSEABLE:
            return None
        if self.verdict == self.Verdict.TIE or self.first_shown_id == self.idea_a_id:
            return self.verdict
        return {"A": "B", "B": "A"}[self.verdict]

    def winner_id(self) -> int | None:
        return {"A": self.idea_a_id, "B": self.idea_b_id}.get(self.verdict)


class IdeaRating(models.Model):
    """A per-idea score from a run (pairwise 1–5, Swiss wins, Elo, Bradley–Terry, mean score)."""

    run = models.ForeignKey(JudgeRun, on_delete=models.CASCADE, related_name="ratings")
    idea = models.ForeignKey("studies.Idea", on_delete=models.CASCADE, related_name="ratings")
    dimension = models.CharField(max_length=64)
    score = models.FloatField(null=True, blank=True)
    ci_low = models.FloatField(null=True, blank=True)
    ci_high = models.FloatField(null=True, blank=True)
    history = models.JSONField(default=list, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "idea", "dimension"], name="unique_rating")
        ]
        ordering = ["run", "dimension", "-score"]

    def __str__(self) -> str:
        return f"{self.dimension}={self.score} for idea {self.idea_id}"


class Formalisation(models.Model):
    """LigBench's four-part restatement of an idea, shown to the owner next to the idea."""

    run = models.ForeignKey(JudgeRun, on_delete=models.CASCADE, related_name="formalisations")
    idea = models.ForeignKey(
        "studies.Idea", on_delete=models.CASCADE, related_name="formalisations"
    )
    parts = models.JSONField(null=True, blank=True, help_text="None when unparseable.")
    call = models.ForeignKey(LLMCall, null=True, blank=True, on_delete=models.SET_NULL)
    parse_error = models.TextField(blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "idea"], name="unique_formalisation")]

    def __str__(self) -> str:
        return f"formalisation of idea {self.idea_id}"

    def as_dict(self) -> dict[str, Any]:
        return dict(self.parts or {})


class ReferenceCorpus(models.Model):
    """A set of published papers with review scores (LigBench's PAIR-IQ, or one of ours).

    A researcher's (`created_by`), used by the studies they own, whose teams see it; or
    shared (nobody's: imported from the command line), used by every study. A name is
    unique among its owner's corpora, and among the shared ones: two researchers may
    both call theirs "ICLR", and neither learns of the other's. Deleting a researcher
    who still has corpora is refused, so a private corpus never turns into a shared one.

    Imported whole or not at all (`judging.corpus.reference_corpus_import`). `debias`
    keeps, per dimension, the venue means and the overall mean the papers' debiased
    scores were computed from, so the page can show what the mean shift did.
    """

    name = models.CharField(max_length=200)
    source = models.CharField(max_length=500, blank=True, help_text="File it was imported from.")
    description = models.TextField(blank=True)
    debias = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        help_text="The researcher whose corpus it is; empty: shared with every researcher.",
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "reference corpora"
        constraints = [
            models.UniqueConstraint(
                fields=["created_by", "name"],
                condition=models.Q(created_by__isnull=False),
                name="unique_corpus_name_per_owner",
            ),
            models.UniqueConstraint(
                fields=["name"],
                condition=models.Q(created_by__isnull=True),
                name="unique_shared_corpus_name",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class ReferencePaper(models.Model):
    """One reference paper: metadata, review scores on LigBench's 0–5 scale, its four parts.

    `rating`/`contribution`/`soundness` are the scores as imported; the `*_debiased`
    fields are the per-venue mean shift ŝ = s − μ_venue + μ_all computed at import, with
    the venue taken as venue and year together (reviewing differs across years too).
    `embedding` is whatever vector the file carried (PAIR-IQ's are 1024-d from another
    model) and is kept, not used; retrieval needs query and papers in one space, so it
    uses `minilm`, our all-MiniLM-L6-v2 vector of the four parts (float32 bytes).
    """

    DIMENSIONS = ("rating", "contribution", "soundness")

    corpus = models.ForeignKey(ReferenceCorpus, on_delete=models.CASCADE, related_name="papers")
    row = models.PositiveIntegerField(help_text="Position in the imported file, from 1.")
    external_id = models.CharField(max_length=500, blank=True)
    title = models.CharField(max_length=1000)
    abstract = models.TextField(blank=True)
    venue = models.CharField(max_length=100)
    year = models.PositiveSmallIntegerField(null=True, blank=True)
    decision = models.CharField(max_length=100, blank=True)
    rating = models.FloatField(null=True, blank=True)
    contribution = models.FloatField(null=True, blank=True)
    soundness = models.FloatField(null=True, blank=True)
    rating_debiased = models.FloatField(null=True, blank=True)
    contribution_debiased = models.FloatField(null=True, blank=True)
    soundness_debiased = models.FloatField(null=True, blank=True)
    main_target = models.TextField(blank=True)
    core_breakthrough = models.TextField(blank=True)
    innovative_methods = models.TextField(blank=True)
    experimental_design = models.TextField(blank=True)
    embedding = models.JSONField(null=True, blank=True)
    minilm = models.BinaryField(null=True, blank=True)

    class Meta:
        ordering = ["corpus", "row"]
        constraints = [
            models.UniqueConstraint(fields=["corpus", "row"], name="unique_reference_row"),
        ]

    def __str__(self) -> str:
        return self.title

    @property
    def venue_key(self) -> str:
        """The debiasing group: venue and year."""
        return f"{self.venue} {self.year}" if self.year else self.venue

    def parts(self) -> dict[str, str]:
        return {
            "main_target": self.main_target,
            "core_breakthrough": self.core_breakthrough,
            "innovative_methods": self.innovative_methods,
            "experimental_design": self.experimental_design,
        }

    def is_formalised(self) -> bool:
        return all(v.strip() for v in self.parts().values())

    def debiased(self, dimension: str) -> float | None:
        value = getattr(self, f"{dimension}_debiased")
        return None if value is None else float(value)

    def formal_text(self) -> str:
        """What retrieval reads: the four parts, or title and abstract when they are missing."""
        if self.is_formalised():
            return "\n".join(self.parts().values())
        return f"{self.title}\n{self.abstract}".strip()


class ReferenceComparison(models.Model):
    """A judge's verdict between a target and a reference paper on one dimension.

    The target is a study idea (LigBench runs) or another reference paper (judge
    validation, `target_reference`). `verdict` is about the target: "A" means the target
    won whichever side it was shown on, "B" that the reference won; "unparseable" is its
    own verdict, never a win, a loss or a tie.
    """

    Verdict = PairwiseOutcome.Verdict

    run = models.ForeignKey(JudgeRun, on_delete=models.CASCADE, related_name="reference_outcomes")
    idea = models.ForeignKey(
        "studies.Idea", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    target_reference = models.ForeignKey(
        ReferencePaper, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    reference = models.ForeignKey(ReferencePaper, on_delete=models.CASCADE, related_name="+")
    target_first = models.BooleanField(help_text="The target was shown as A.")
    dimension = models.CharField(max_length=64)
    verdict = models.CharField(max_length=16, choices=PairwiseOutcome.Verdict.choices)
    rank = models.PositiveSmallIntegerField(default=0, help_text="Retrieval rank, from 1.")
    call = models.ForeignKey(
        LLMCall, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    parse_error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["run", "idea", "reference", "target_first", "dimension"],
                condition=models.Q(idea__isnull=False),
                name="unique_idea_reference_outcome",
            ),
            models.UniqueConstraint(
                fields=["run", "target_reference", "reference", "target_first", "dimension"],
                condition=models.Q(target_reference__isnull=False),
                name="unique_reference_pair_outcome",
            ),
            models.CheckConstraint(
                condition=models.Q(verdict__in=["A", "B", "tie", "unparseable"]),
                name="reference_comparison_verdict_valid",
            ),
        ]
        ordering = ["run", "id"]

    def __str__(self) -> str:
        return f"{self.idea_id or self.target_reference_id} vs {self.reference_id}: {self.verdict}"
