"""The study domain (docs/architecture.md, "Apps and layers").

Rules about one object live here as methods; workflows over several objects are in
`studies.services`. Nothing here reveals an idea's condition or author to a reviewer: the
reviewer-facing code only ever receives `Idea.public_id` and approved text.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

from .job_kinds import JOB_KINDS
from .protocol.forms import FormDefinition


class ReviewForm(models.Model):
    """A versioned review-form definition; immutable once a review or study uses it."""

    key = models.SlugField(max_length=64)
    version = models.PositiveIntegerField()
    title = models.CharField(max_length=200)
    definition = models.JSONField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["key", "version"], name="unique_form_version")
        ]
        ordering = ["key", "-version"]

    def __str__(self) -> str:
        return f"{self.key} v{self.version}"

    def as_definition(self) -> FormDefinition:
        return FormDefinition.from_dict(self.definition)

    def is_in_use(self) -> bool:
        return self.studies.filter(reviews__isnull=False).exists()  # type: ignore[attr-defined]


class TopicChoiceUse(models.TextChoices):
    """How the assignment treats a reviewer's two ranked topics."""

    EQUAL = "equal", "Both choices equally, at random (as in Si et al.)"
    FIRST_PREFERRED = "first", "First choice preferred"


def invitation_bind_email_default() -> bool:
    """A new study binds its invitation links to the invited address as the deployment's
    IDEAREVIEW_INVITATION_BIND_EMAIL says; its settings page can change that."""
    return bool(settings.IDEAREVIEW_INVITATION_BIND_EMAIL)


class Study(models.Model):
    class Status(models.TextChoices):
        DRAFT = "draft", "Draft"
        PREPARING = "preparing", "Preparing"
        REVIEWING = "reviewing", "Reviewing"
        CLOSED = "closed", "Closed"

    slug = models.SlugField(max_length=64, unique=True)
    title = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="owned_studies"
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.DRAFT)
    review_form = models.ForeignKey(ReviewForm, on_delete=models.PROTECT, related_name="studies")
    baseline_condition = models.CharField(
        max_length=64, blank=True, help_text="Condition key the others are compared with."
    )
    min_reviews_per_idea = models.PositiveSmallIntegerField(default=2)
    max_reviews_per_idea = models.PositiveSmallIntegerField(default=4)
    min_load = models.PositiveSmallIntegerField(default=2)
    max_load = models.PositiveSmallIntegerField(default=7)
    assignment_seed = models.BigIntegerField(null=True, blank=True)
    # Screening rule: reviewers need at least this many papers at major venues.
    screening_min_papers = models.PositiveSmallIntegerField(default=1)
    reviews_due_at = models.DateTimeField(null=True, blank=True)
    invitation_days = models.PositiveSmallIntegerField(default=14)
    invitation_bind_email = models.BooleanField(
        default=invitation_bind_email_default,
        help_text="Only an account with the invited email address may take an invitation "
        "link (a forwarded link is no use to anyone else).",
    )
    closed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)
    # Idea preparation: the judge that normalises the ideas' style, and the owner's
    # recorded reason for opening although conditions differ in ideas per topic.
    normalization_config = models.ForeignKey(
        "llm.JudgeConfig", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    topic_mismatch_reason = models.TextField(blank=True)
    topic_mismatch_reason_at = models.DateTimeField(null=True, blank=True)
    topic_choice_use = models.CharField(
        max_length=8,
        choices=TopicChoiceUse.choices,
        default=TopicChoiceUse.FIRST_PREFERRED,
        help_text="How the assignment uses each reviewer's two chosen topics.",
    )
    # Empty keeps the review form's own minimum.
    rationale_min_words = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="Words each rationale needs; empty: the form's minimum."
    )
    # Payments (Si et al. paid $25 per review, $300 per idea and $1,000 to each of the top 5).
    payment_currency = models.CharField(max_length=3, default="USD")
    payment_per_review = models.DecimalField(
        max_digits=10, decimal_places=2, default=0, help_text="Paid per accepted review."
    )
    payment_per_idea = models.DecimalField(
        max_digits=10, decimal_places=2, default=0, help_text="Paid to an idea's author."
    )
    payment_bonus = models.DecimalField(
        max_digits=10, decimal_places=2, default=0, help_text="Bonus to each top-k idea's author."
    )
    payment_bonus_top_k = models.PositiveSmallIntegerField(
        default=0, help_text="How many ideas (by mean overall score) get the bonus."
    )
    # Gold items each reviewer gets besides their load (when the study has gold ideas).
    gold_per_reviewer = models.PositiveSmallIntegerField(
        default=1, help_text="Gold items each reviewer gets besides their load."
    )
    # The analysis plan (docs/analysis-plan.md; empty = the default plan) and, once
    # frozen for pre-registration, the registered copy with its hash and time.
    analysis_plan = models.JSONField(default=dict, blank=True)
    analysis_plan_registered = models.JSONField(null=True, blank=True)
    analysis_plan_hash = models.CharField(max_length=64, blank=True)
    analysis_plan_frozen_at = models.DateTimeField(null=True, blank=True)
    # The study whose ideas this one reviews again at a later stage (e.g. the ideation
    # study of an execution study): its report compares the two (docs/phases.md).
    previous_phase = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="next_phases",
        help_text="The earlier phase of the same ideas, compared in this study's report.",
    )

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "studies"
        constraints = [
            models.CheckConstraint(
                condition=models.Q(min_load__gte=1, min_load__lte=models.F("max_load")),
                name="study_load_range",
            ),
            models.CheckConstraint(
                condition=models.Q(
                    min_reviews_per_idea__gte=1,
                    min_reviews_per_idea__lte=models.F("max_reviews_per_idea"),
                ),
                name="study_reviews_per_idea_range",
            ),
            models.CheckConstraint(
                condition=models.Q(invitation_days__gte=1), name="study_invitation_days_positive"
            ),
            models.CheckConstraint(
                condition=models.Q(rationale_min_words__isnull=True)
                | models.Q(rationale_min_words__lte=2000),
                name="study_rationale_min_words_range",
            ),
            models.CheckConstraint(
                condition=models.Q(
                    payment_per_review__gte=0, payment_per_idea__gte=0, payment_bonus__gte=0
                ),
                name="study_payments_not_negative",
            ),
            models.CheckConstraint(
                condition=models.Q(topic_choice_use__in=[c[0] for c in TopicChoiceUse.choices]),
                name="study_topic_choice_use_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(status__in=["draft", "preparing", "reviewing", "closed"]),
                name="study_status_valid",
            ),
            models.CheckConstraint(
                condition=~models.Q(previous_phase=models.F("pk")),
                name="study_previous_phase_not_itself",
            ),
        ]

    def __str__(self) -> str:
        return self.title

    def role_of(self, user: Any) -> str:
        """The user's role in this study ("owner", "editor", "viewer"), "" for none."""
        if not getattr(user, "is_authenticated", False):
            return ""
        member = self.members.filter(user_id=user.pk).first()  # type: ignore[attr-defined]
        return member.role if member else ""

    def rationale_minimum(self) -> int:
        """Words a rationale needs: the study's setting, else the review form's."""
        if self.rationale_min_words is not None:
            return self.rationale_min_words
        return self.form_definition().min_rationale_words

    def form_definition(self) -> FormDefinition:
        return self.review_form.as_definition()

    def baseline(self) -> str:
        """The baseline condition: the stored one, else the first human condition."""
        if self.baseline_condition:
            return self.baseline_condition
        human = self.conditions.filter(kind=Condition.Kind.HUMAN).order_by("key").first()
        if human is None:
            first = self.conditions.order_by("key").first()
            return first.key if first else ""
        return human.key

    def is_closed(self) -> bool:
        return self.status == self.Status.CLOSED

    def is_open_to_reviewers(self) -> bool:
        """Reviewers see their assignments and pair tasks once the study was opened for
        review (and still read them, unchangeable, once it is closed)."""
        return self.status in (self.Status.REVIEWING, self.Status.CLOSED)

    def load_choices(self) -> list[int]:
        return list(range(self.min_load, self.max_load + 1))


class StudyMember(models.Model):
    """A researcher on a study's team. Owners manage roles and may close or delete the
    study; editors run it; viewers read. `Study.owner` stays the creator."""

    class Role(models.TextChoices):
        OWNER = "owner", "Owner"
        EDITOR = "editor", "Editor"
        VIEWER = "viewer", "Viewer"

    # Higher rank may do everything a lower one may.
    RANK: dict[str, int] = {"viewer": 1, "editor": 2, "owner": 3}

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="members")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="study_memberships"
    )
    role = models.CharField(max_length=8, choices=Role.choices)
    added_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    added_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["study", "user"], name="unique_study_member"),
            models.CheckConstraint(
                condition=models.Q(role__in=["owner", "editor", "viewer"]),
                name="study_member_role_valid",
            ),
        ]
        ordering = ["study", "user__username"]

    def __str__(self) -> str:
        return f"{self.user} ({self.role}) on {self.study_id}"

    @classmethod
    def role_at_least(cls, role: str, needed: str) -> bool:
        return cls.RANK.get(role, 0) >= cls.RANK[needed]


class Topic(models.Model):
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="topics")
    name = models.CharField(max_length=120)
    description = models.TextField(blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["study", "name"], name="unique_topic_per_study")
        ]
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Condition(models.Model):
    class Kind(models.TextChoices):
        HUMAN = "human", "Human"
        AI = "ai", "AI"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="conditions")
    key = models.CharField(max_length=64)
    label = models.CharField(max_length=120, blank=True)
    kind = models.CharField(max_length=8, choices=Kind.choices)
    generating_model = models.CharField(
        max_length=200,
        blank=True,
        help_text="The model that wrote this condition's ideas (e.g. gpt-4o), for the "
        "judges' self-preference figure; its family is read from the name. Shown to the "
        "team only.",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["study", "key"], name="unique_condition_per_study"),
            models.CheckConstraint(
                condition=models.Q(kind__in=["human", "ai"]), name="condition_kind_valid"
            ),
        ]
        ordering = ["key"]

    def __str__(self) -> str:
        return self.key


class Idea(models.Model):
    class NormalizationStatus(models.TextChoices):
        NONE = "none", "Not normalised"
        PROPOSED = "proposed", "Proposed"
        APPROVED = "approved", "Approved"
        EDITED = "edited", "Edited and approved"
        REJECTED = "rejected", "Rejected"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="ideas")
    topic = models.ForeignKey(Topic, on_delete=models.PROTECT, related_name="ideas")
    # The only identifier reviewers ever see: random, so it leaks no order or condition.
    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    title = models.CharField(max_length=500, blank=True)
    raw_text = models.TextField(blank=True)
    sections = models.JSONField(default=dict, blank=True)
    normalized_text = models.TextField(blank=True)
    normalization_status = models.CharField(
        max_length=16, choices=NormalizationStatus.choices, default=NormalizationStatus.NONE
    )
    author_institution = models.CharField(max_length=300, blank=True)
    # Who to pay for the idea (an e-mail or a name); owners only, never reviewers.
    author_contact = models.CharField(max_length=300, blank=True)
    conditions = models.ManyToManyField(Condition, through="IdeaCondition", related_name="ideas")
    created_at = models.DateTimeField(default=timezone.now)
    # Names of the automatic checks the current rewrite failed ("llm_error" when the
    # call itself failed), so lists can show and filter them without the results.
    normalization_flags = models.JSONField(default=list, blank=True)
    # A gold item: the score range the owner expects per metric ({"overall": [2, 4]});
    # null for an ordinary idea. Owners only: reviewers never learn an idea is gold, and
    # gold reviews stay out of the analysis, the topic balance and the review counts.
    gold_ranges = models.JSONField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(
                    normalization_status__in=["none", "proposed", "approved", "edited", "rejected"]
                ),
                name="idea_normalization_status_valid",
            ),
        ]
        ordering = ["id"]

    def __str__(self) -> str:
        return self.title or str(self.public_id)

    def reviewable_text(self) -> str:
        """Only signed-off text reaches reviewers."""
        if self.normalization_status in {
            self.NormalizationStatus.APPROVED,
            self.NormalizationStatus.EDITED,
        }:
            return self.normalized_text
        return ""

    def section_status(self) -> dict[str, list[str]]:
        """Template sections found (with text), missing, and present but empty."""
        from .protocol.template import SECTION_KEYS

        sections = self.sections or {}
        return {
            "found": [k for k in SECTION_KEYS if (sections.get(k) or "").strip()],
            "missing": [k for k in SECTION_KEYS if k not in sections],
            "empty": [k for k in SECTION_KEYS if k in sections and not (sections[k] or "").strip()],
        }

    def word_count(self) -> int:
        from .protocol.template import word_count

        return word_count(self.raw_text)

    def is_excluded(self) -> bool:
        return hasattr(self, "exclusion")

    @property
    def is_gold(self) -> bool:
        return self.gold_ranges is not None

    def is_text_locked(self) -> bool:
        """Once reviewers have the idea, its approved text may not change under them.
        They have it once it is assigned in a study open for review: before the study
        opens the owner may still rewrite it (e.g. after a leakage check)."""
        return (
            self.study.is_open_to_reviewers()
            and self.assignments.exclude(status="withdrawn").exists()
        )


class IdeaCondition(models.Model):
    """An idea's membership in a condition, with the id it carried there in the source."""

    idea = models.ForeignKey(Idea, on_delete=models.CASCADE, related_name="memberships")
    condition = models.ForeignKey(Condition, on_delete=models.CASCADE, related_name="memberships")
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="+")
    external_id = models.CharField(max_length=200)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["idea", "condition"], name="unique_idea_condition"),
            models.UniqueConstraint(fields=["study", "external_id"], name="unique_external_id"),
        ]

    def __str__(self) -> str:
        return self.external_id


class Reviewer(models.Model):
    class Screening(models.TextChoices):
        PENDING = "pending", "Pending"
        APPROVED = "approved", "Approved"
        REJECTED = "rejected", "Rejected"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="reviewers")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="reviewer_profiles",
    )
    pseudonym = models.CharField(max_length=32)
    external_id = models.CharField(max_length=200, blank=True)
    institution = models.CharField(max_length=300, blank=True)
    position = models.CharField(max_length=120, blank=True)
    major_venue_papers = models.PositiveIntegerField(null=True, blank=True)
    scholar_url = models.URLField(blank=True)
    reviewing_experience = models.TextField(blank=True)
    topic_preferences = models.JSONField(default=list, blank=True)
    preferred_load = models.PositiveSmallIntegerField(null=True, blank=True)
    screening = models.CharField(
        max_length=16, choices=Screening.choices, default=Screening.PENDING
    )
    screening_reason = models.TextField(blank=True)
    consent_at = models.DateTimeField(null=True, blank=True)
    honor_code_at = models.DateTimeField(null=True, blank=True)
    name = models.CharField(max_length=200, blank=True)
    email = models.EmailField(blank=True)
    # How the reviewer wants to be paid (e.g. a PayPal address), given on their profile;
    # only the study's owners read it, in the payments CSV, and it is never exported.
    payment_handle = models.CharField(max_length=300, blank=True)
    profile_completed_at = models.DateTimeField(null=True, blank=True)
    screened_at = models.DateTimeField(null=True, blank=True)
    # A reviewer who stopped: their open work is withdrawn and re-solved for others.
    dropped_at = models.DateTimeField(null=True, blank=True)
    joined_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["study", "pseudonym"], name="unique_pseudonym"),
            models.UniqueConstraint(
                fields=["study", "user"],
                condition=models.Q(user__isnull=False),
                name="unique_reviewer_user_per_study",
            ),
            models.CheckConstraint(
                condition=models.Q(screening__in=["pending", "approved", "rejected"]),
                name="reviewer_screening_valid",
            ),
        ]
        ordering = ["pseudonym"]

    def __str__(self) -> str:
        return self.pseudonym

    @property
    def is_approved(self) -> bool:
        return self.screening == self.Screening.APPROVED and self.dropped_at is None

    def meets_screening_rule(self) -> bool:
        return (self.major_venue_papers or 0) >= self.study.screening_min_papers

    def next_step(self) -> str:
        """The sign-up step still open: consent, profile, screening, or "" when done."""
        if self.consent_at is None or self.honor_code_at is None:
            return "consent"
        if self.profile_completed_at is None:
            return "profile"
        if self.screening != self.Screening.APPROVED:
            return "screening"
        return ""

    @property
    def status_label(self) -> str:
        if self.dropped_at:
            return "dropped"
        step = self.next_step()
        if step == "screening":
            return f"screening {self.screening}"
        return {"consent": "needs consent", "profile": "needs profile"}.get(step, "approved")


class Invitation(models.Model):
    """A single-use sign-up link. The URL carries `nonce` signed with a timestamp, so a
    link can be neither guessed nor altered, and it expires by its signature and by
    `expires_at` (whichever is earlier)."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="invitations")
    email = models.EmailField()
    name = models.CharField(max_length=200, blank=True)
    nonce = models.CharField(max_length=64, unique=True)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    reviewer = models.OneToOneField(
        Reviewer, null=True, blank=True, on_delete=models.SET_NULL, related_name="invitation"
    )
    sent_count = models.PositiveSmallIntegerField(default=0)
    last_sent_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"invitation to {self.email}"

    def is_expired(self, now: Any = None) -> bool:
        return (now or timezone.now()) >= self.expires_at

    @property
    def status_label(self) -> str:
        if self.used_at:
            return "used"
        if self.revoked_at:
            return "revoked"
        if self.is_expired():
            return "expired"
        return "open"


class Assignment(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        DRAFT = "draft", "Draft"
        SUBMITTED = "submitted", "Submitted"
        # Taken back from the reviewer (dropped out, or a re-solve moved it); kept so a
        # draft is not lost if the pair comes back.
        WITHDRAWN = "withdrawn", "Withdrawn"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="assignments")
    reviewer = models.ForeignKey(Reviewer, on_delete=models.CASCADE, related_name="assignments")
    idea = models.ForeignKey(Idea, on_delete=models.CASCADE, related_name="assignments")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    created_at = models.DateTimeField(default=timezone.now)
    # Server-measured time on task: active seconds between events, each gap capped.
    opened_at = models.DateTimeField(null=True, blank=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)
    active_seconds = models.FloatField(default=0.0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["reviewer", "idea"], name="unique_assignment"),
            models.CheckConstraint(
                condition=models.Q(status__in=["pending", "draft", "submitted", "withdrawn"]),
                name="assignment_status_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.reviewer} → idea {self.idea_id}"

    @property
    def is_open(self) -> bool:
        return self.status in {self.Status.PENDING, self.Status.DRAFT}

    def is_overdue(self, now: Any = None) -> bool:
        due = self.study.reviews_due_at
        return bool(self.is_open and due and (now or timezone.now()) > due)

    def record_activity(self, now: Any, idle_cap_seconds: float) -> None:
        """Add the time since the last event, at most `idle_cap_seconds` (an idle tab
        must not count as work)."""
        if self.opened_at is None:
            self.opened_at = now
        elif self.last_seen_at is not None:
            gap = (now - self.last_seen_at).total_seconds()
            self.active_seconds += max(0.0, min(gap, idle_cap_seconds))
        self.last_seen_at = now


class Review(models.Model):
    class Status(models.TextChoices):
        DRAFT = "draft", "Draft"
        SUBMITTED = "submitted", "Submitted"

    # A review is the study's data: deleting its idea, reviewer or assignment is refused
    # (RESTRICT: the admin names the reviews that stand in the way); only deleting the
    # whole study takes its reviews with it.
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="reviews")
    idea = models.ForeignKey(Idea, on_delete=models.RESTRICT, related_name="reviews")
    reviewer = models.ForeignKey(
        Reviewer, null=True, blank=True, on_delete=models.RESTRICT, related_name="reviews"
    )
    assignment = models.OneToOneField(
        Assignment, null=True, blank=True, on_delete=models.RESTRICT, related_name="review"
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.SUBMITTED)
    # The number of submits: raised by each submit (a draft save keeps it); a tab that
    # sends an older number is stale.
    version = models.PositiveIntegerField(default=0)
    familiarity = models.PositiveSmallIntegerField(null=True, blank=True)
    familiarity_raw = models.TextField(blank=True)
    confidence = models.PositiveSmallIntegerField(null=True, blank=True)
    confidence_raw = models.TextField(blank=True)
    minutes = models.FloatField(null=True, blank=True, help_text="Self-reported, parsed.")
    minutes_raw = models.TextField(blank=True)
    minutes_measured = models.FloatField(null=True, blank=True, help_text="Measured by server.")
    consent_raw = models.CharField(max_length=200, blank=True)
    honor_code_raw = models.CharField(max_length=200, blank=True)
    flags = models.JSONField(default=list, blank=True)
    extra = models.JSONField(default=dict, blank=True)
    # The reviewer's unsaved-to-scores answers, written by autosave; the submitted
    # answers live in ReviewScore and the fields above.
    draft = models.JSONField(default=dict, blank=True)
    draft_saved_at = models.DateTimeField(null=True, blank=True)
    # Identity of an imported review: a hash of its content, so re-imports change nothing.
    source_key = models.CharField(max_length=64, blank=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["study", "source_key"],
                condition=~models.Q(source_key=""),
                name="unique_imported_review",
            ),
            models.CheckConstraint(
                condition=models.Q(status__in=["draft", "submitted"]), name="review_status_valid"
            ),
        ]
        ordering = ["id"]

    def __str__(self) -> str:
        return f"review {self.pk} of idea {self.idea_id}"


class RationaleEmbedding(models.Model):
    """A rationale's sentence embedding, kept so the near-duplicate flag embeds each text
    once; `digest` (SHA-256 of the text) tells a stale vector after an edit."""

    review = models.ForeignKey(Review, on_delete=models.CASCADE, related_name="embeddings")
    metric = models.CharField(max_length=64)
    digest = models.CharField(max_length=64)
    vector = models.BinaryField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["review", "metric"], name="unique_rationale_embedding")
        ]

    def __str__(self) -> str:
        return f"embedding of review {self.review_id}'s {self.metric} rationale"


class ReviewAcceptance(models.Model):
    """The owner's decision to pay for a submitted review or not, with the reason. Kept
    apart from the review: reviewers never see it, and the analysis reads only that a
    review was rejected, as a quality flag, which the plan's exclusion rules may name."""

    class Decision(models.TextChoices):
        ACCEPTED = "accepted", "Accepted"
        REJECTED = "rejected", "Rejected"

    review = models.OneToOneField(Review, on_delete=models.CASCADE, related_name="acceptance")
    decision = models.CharField(max_length=8, choices=Decision.choices)
    reason = models.TextField(blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(decision__in=["accepted", "rejected"]),
                name="review_acceptance_decision_valid",
            ),
            # A rejection says why; the reviewer may ask.
            models.CheckConstraint(
                condition=~models.Q(decision="rejected", reason=""),
                name="review_rejection_has_reason",
            ),
        ]

    def __str__(self) -> str:
        return f"review {self.review_id} {self.decision}"


class ReviewScore(models.Model):
    review = models.ForeignKey(Review, on_delete=models.CASCADE, related_name="scores")
    metric = models.CharField(max_length=64)
    score = models.FloatField()
    rationale = models.TextField(blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["review", "metric"], name="unique_metric_score")
        ]

    def __str__(self) -> str:
        return f"{self.metric}={self.score}"


class ReviewRevision(models.Model):
    """Every submission of a review (the first and each later edit), as submitted."""

    review = models.ForeignKey(Review, on_delete=models.CASCADE, related_name="revisions")
    number = models.PositiveIntegerField()
    data = models.JSONField()
    minutes_measured = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["review", "number"], name="unique_review_revision")
        ]
        ordering = ["review", "number"]

    def __str__(self) -> str:
        return f"revision {self.number} of review {self.review_id}"


class PairTask(models.Model):
    """A reviewer compares two ideas of one topic. `idea_a`/`idea_b` is the order the task
    was created in (for condition pairs: A from `condition_a`); `a_on_left` is the side
    drawn at random for display, so position bias can be measured."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        SUBMITTED = "submitted", "Submitted"
        WITHDRAWN = "withdrawn", "Withdrawn"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="pair_tasks")
    reviewer = models.ForeignKey(Reviewer, on_delete=models.CASCADE, related_name="pair_tasks")
    idea_a = models.ForeignKey(Idea, on_delete=models.CASCADE, related_name="+")
    idea_b = models.ForeignKey(Idea, on_delete=models.CASCADE, related_name="+")
    condition_a = models.CharField(max_length=64, blank=True)
    condition_b = models.CharField(max_length=64, blank=True)
    a_on_left = models.BooleanField()
    dimensions = models.JSONField(default=list)
    source = models.CharField(max_length=16, default="random")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    rationale = models.TextField(blank=True)
    opened_at = models.DateTimeField(null=True, blank=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["reviewer", "idea_a", "idea_b"], name="unique_pair_task"
            ),
            models.CheckConstraint(
                condition=~models.Q(idea_a=models.F("idea_b")), name="pair_of_two_ideas"
            ),
            models.CheckConstraint(
                condition=models.Q(status__in=["pending", "submitted", "withdrawn"]),
                name="pair_task_status_valid",
            ),
        ]
        ordering = ["id"]

    def __str__(self) -> str:
        return f"pair task {self.pk}"

    @property
    def left(self) -> Idea:
        return self.idea_a if self.a_on_left else self.idea_b

    @property
    def right(self) -> Idea:
        return self.idea_b if self.a_on_left else self.idea_a


class PairJudgment(models.Model):
    """One dimension of a pair task. `choice` is as the reviewer saw it (first = left);
    `winner` translates it back to the task's A/B order."""

    class Choice(models.TextChoices):
        FIRST = "first", "First is better"
        TIE = "tie", "Tie"
        SECOND = "second", "Second is better"

    # A reviewer's pair ratings are kept like reviews: deleting their task (with its
    # reviewer or ideas) is refused while they exist.
    task = models.ForeignKey(PairTask, on_delete=models.RESTRICT, related_name="judgments")
    dimension = models.CharField(max_length=64)
    choice = models.CharField(max_length=8, choices=Choice.choices)
    winner = models.CharField(max_length=4)  # "a", "b" or "tie"
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["task", "dimension"], name="unique_pair_judgment"),
            models.CheckConstraint(
                condition=models.Q(choice__in=["first", "tie", "second"]),
                name="pair_judgment_choice_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.dimension}: {self.choice}"


class ImportBatch(models.Model):
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="imports")
    kind = models.CharField(max_length=32)
    filename = models.CharField(max_length=300)
    sha256 = models.CharField(max_length=64)
    summary = models.JSONField(default=dict)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.kind} import of {self.filename}"


class JobRun(models.Model):
    """A long job's state and progress, kept in a row (not in Celery's result backend)."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"
        LOST = "lost", "Lost"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="jobs")
    kind = models.CharField(max_length=32)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    done = models.PositiveIntegerField(default=0)
    total = models.PositiveIntegerField(default=0)
    message = models.CharField(max_length=300, blank=True)
    error = models.TextField(blank=True)
    params = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The worker that holds the job writes its lease token once and its heartbeat every
    # few seconds; a row whose heartbeat stops is lost, and a second delivery of the same
    # task finds a fresh heartbeat under another lease and leaves the job alone.
    lease = models.CharField(max_length=32, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    # The process that holds the lease ("worker node:pid"), so the worker's main process
    # can tell its pool child running the job died; and when a worker last took the job's
    # message off the queue, so a queued job whose worker died before claiming it is lost.
    worker = models.CharField(max_length=300, blank=True)
    received_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(
                    status__in=["queued", "running", "done", "failed", "cancelled", "lost"]
                ),
                name="job_run_status_valid",
            ),
        ]
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.kind} job {self.pk} ({self.status})"

    @property
    def label(self) -> str:
        """What the progress partial calls this kind of job while it runs."""
        kind = JOB_KINDS.get(self.kind)
        return kind.label if kind else self.kind.capitalize()

    @property
    def can_retry(self) -> bool:
        return self.status in {self.Status.FAILED, self.Status.LOST, self.Status.CANCELLED}

    @property
    def percent(self) -> int:
        if self.status == self.Status.DONE:
            return 100
        return int(100 * self.done / self.total) if self.total else 0

    @property
    def is_active(self) -> bool:
        return self.status in {self.Status.QUEUED, self.Status.RUNNING}


class StudyReport(models.Model):
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="reports")
    job = models.OneToOneField(
        JobRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="report"
    )
    data = models.JSONField()
    # Named only once every file is saved there (studies.report_files).
    directory = models.CharField(
        max_length=500,
        help_text="The report's version folder in the reports storage: <study slug>/<version>.",
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"report of {self.study_id} at {self.created_at:%Y-%m-%d %H:%M}"


class AuditEvent(models.Model):
    """One entry of a study's audit log (or, without a study, of the server's), chained
    by hash to the entry before it (studies/protocol/auditchain.py): `seq` is its place
    in its chain, `actor_name` the actor's username when it was written."""

    study = models.ForeignKey(
        Study, null=True, blank=True, on_delete=models.CASCADE, related_name="audit_events"
    )
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    verb = models.CharField(max_length=64)
    detail = models.JSONField(default=dict, blank=True)
    at = models.DateTimeField(default=timezone.now)
    seq = models.PositiveIntegerField()
    actor_name = models.CharField(max_length=150, blank=True)
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64)

    class Meta:
        ordering = ["-at"]
        constraints = [
            models.UniqueConstraint(
                fields=["study", "seq"],
                condition=models.Q(study__isnull=False),
                name="auditevent_study_seq_unique",
            ),
            models.UniqueConstraint(
                fields=["seq"],
                condition=models.Q(study__isnull=True),
                name="auditevent_server_seq_unique",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.verb} at {self.at:%Y-%m-%d %H:%M}"


# --- Idea preparation: intake, topic matching, duplicates, normalization ------


class IdeaUpload(models.Model):
    """An uploaded file (ideas or invitations) kept between "show me the problems" and
    "take the valid rows", so the owner does not upload it twice. Deleted once its rows
    are taken (studies/uploads.py)."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="idea_uploads")
    name = models.CharField(max_length=300)
    data = models.BinaryField()
    sha256 = models.CharField(max_length=64)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"upload {self.name}"


class IdeaExclusion(models.Model):
    """An idea left out of the study (topic matching, or a duplicate). Rows stay so the
    decision is visible and reversible; an idea is excluded while its row exists."""

    idea = models.OneToOneField(Idea, on_delete=models.CASCADE, related_name="exclusion")
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="idea_exclusions")
    reason = models.CharField(max_length=300)
    seed = models.BigIntegerField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"idea {self.idea_id} left out: {self.reason}"


class DuplicatePair(models.Model):
    """A near-duplicate pair found by one duplicate-check job (idea_a.pk < idea_b.pk)."""

    job = models.ForeignKey(JobRun, on_delete=models.CASCADE, related_name="duplicate_pairs")
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="duplicate_pairs")
    idea_a = models.ForeignKey(Idea, on_delete=models.CASCADE, related_name="+")
    idea_b = models.ForeignKey(Idea, on_delete=models.CASCADE, related_name="+")
    cosine = models.FloatField()
    scope = models.CharField(max_length=8)  # "within" or "across" conditions

    class Meta:
        ordering = ["-cosine", "idea_a_id", "idea_b_id"]

    def __str__(self) -> str:
        return f"{self.idea_a_id}~{self.idea_b_id} ({self.cosine:.3f})"


class NormalizationResult(models.Model):
    """One attempt at rewriting an idea into the house style, and what became of it.

    The prompt's version and hash, the model and the recorded LLM call travel with the
    result, so a sign-off can always be traced to exactly what produced the text.
    """

    class Status(models.TextChoices):
        PROPOSED = "proposed", "Proposed"
        FAILED = "failed", "LLM call failed"
        APPROVED = "approved", "Approved"
        EDITED = "edited", "Edited and approved"
        REJECTED = "rejected", "Rejected"
        SUPERSEDED = "superseded", "Superseded by a re-run"

    idea = models.ForeignKey(Idea, on_delete=models.CASCADE, related_name="normalization_results")
    job = models.ForeignKey(
        JobRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    config = models.ForeignKey(
        "llm.JudgeConfig", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    call = models.ForeignKey(
        "llm.LLMCall", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    prompt_version = models.CharField(max_length=100)
    prompt_hash = models.CharField(max_length=64)
    model = models.CharField(max_length=200, blank=True)
    source_text = models.TextField(help_text="The idea text that was sent.")
    output_text = models.TextField(blank=True, help_text="The rewrite, cleaned of fences.")
    checks = models.JSONField(default=list, blank=True)
    failed_checks = models.JSONField(default=list, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PROPOSED)
    error = models.TextField(blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    final_text = models.TextField(blank=True, help_text="What was approved (edited or not).")
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_note = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(
                    status__in=[
                        "proposed",
                        "failed",
                        "approved",
                        "edited",
                        "rejected",
                        "superseded",
                    ]
                ),
                name="normalization_result_status_valid",
            ),
        ]
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"normalization {self.pk} of idea {self.idea_id} ({self.status})"

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [c for c in self.checks if not c.get("passed")]


class IdeaRevision(models.Model):
    """Every text an idea was approved with, numbered. Reviewers see the latest one; the
    sign-off refuses a new one once the idea is assigned, so they all see the same."""

    idea = models.ForeignKey(Idea, on_delete=models.CASCADE, related_name="revisions")
    number = models.PositiveIntegerField()
    text = models.TextField()
    kind = models.CharField(max_length=16)  # approved / edited
    result = models.ForeignKey(
        NormalizationResult, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["idea", "number"], name="unique_idea_revision")
        ]
        ordering = ["idea", "number"]

    def __str__(self) -> str:
        return f"revision {self.number} of idea {self.idea_id}"


class LeakageExport(models.Model):
    """Shuffled normalised texts for a blind "human or AI?" test; the key stays here."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="leakage_exports")
    seed = models.BigIntegerField()
    key = models.JSONField(default=list)  # [{code, idea_id, public_id, conditions, kind}]
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"leakage export {self.pk} of {self.study_id}"


class PlatformLink(models.Model):
    """A study's arrival link for a participant platform (Prolific by default): which URL
    parameters carry the participant's, the platform study's and the session's ids, how
    many places there are, when an idle place is released, and where a participant who
    finished is sent back to, with which code."""

    PROLIFIC_PARAMS = {"participant": "PROLIFIC_PID", "study": "STUDY_ID", "session": "SESSION_ID"}

    study = models.OneToOneField(Study, on_delete=models.CASCADE, related_name="platform_link")
    enabled = models.BooleanField(default=False)
    platform = models.CharField(max_length=64, default="Prolific")
    participant_param = models.CharField(max_length=64, default="PROLIFIC_PID")
    study_param = models.CharField(max_length=64, default="STUDY_ID", blank=True)
    session_param = models.CharField(max_length=64, default="SESSION_ID", blank=True)
    # When set, arrivals whose study id differs are refused (a link copied into the wrong
    # platform study).
    platform_study_id = models.CharField(max_length=200, blank=True)
    places = models.PositiveIntegerField(default=10)
    abandon_minutes = models.PositiveIntegerField(default=60)
    completion_url = models.URLField(max_length=500, blank=True)
    completion_code = models.CharField(max_length=100, blank=True)
    # The completion URL's query parameter for the code (Prolific's is "cc"); a
    # completion URL that contains "{code}" gets the code there instead.
    code_param = models.CharField(max_length=64, default="cc", blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(places__gte=1), name="platform_places_positive"
            ),
            models.CheckConstraint(
                condition=models.Q(abandon_minutes__gte=1), name="platform_abandon_positive"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.platform} link of {self.study}"


class PlatformParticipant(models.Model):
    """A participant who arrived through a platform link. Their platform ids are personal
    data: only the study's team sees them (the participants page and the bulk files for
    the platform); every export and the package name the reviewer's pseudonym instead."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="platform_participants")
    reviewer = models.OneToOneField(
        Reviewer, on_delete=models.CASCADE, related_name="platform_participant"
    )
    participant_id = models.CharField(max_length=200)
    platform_study_id = models.CharField(max_length=200, blank=True)
    session_id = models.CharField(max_length=200, blank=True)
    # The secret the participant's browser holds in a signed cookie: the PID alone, which
    # is not a secret, never resumes a place.
    secret = models.CharField(max_length=64)
    arrived_at = models.DateTimeField(default=timezone.now)
    last_seen_at = models.DateTimeField(default=timezone.now)
    completed_at = models.DateTimeField(null=True, blank=True)
    released_at = models.DateTimeField(null=True, blank=True)
    release_reason = models.CharField(max_length=200, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["study", "participant_id"], name="unique_platform_participant"
            ),
        ]
        ordering = ["arrived_at", "pk"]

    def __str__(self) -> str:
        return f"{self.reviewer} (platform)"

    @property
    def holds_place(self) -> bool:
        return self.released_at is None
