"""Researcher invitations and self-service sign-up requests."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class ResearcherInvitation(models.Model):
    """An invitation to become a researcher, sent by an administrator or (when
    IDEAREVIEW_OWNER_INVITES allows it) by a study's owner. The link carries a signed
    nonce, never the primary key; it is used once. `team_id`/`team_role` name the study
    team to join on acceptance, as plain values: this app knows no studies."""

    email = models.EmailField()
    nonce = models.CharField(max_length=64, unique=True)
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    accepted_at = models.DateTimeField(null=True, blank=True)
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    revoked_at = models.DateTimeField(null=True, blank=True)
    team_id = models.PositiveBigIntegerField(null=True, blank=True)
    team_role = models.CharField(max_length=16, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(team_id__isnull=True, team_role="")
                | models.Q(team_id__isnull=False) & ~models.Q(team_role=""),
                name="researcher_invitation_team_complete",
            ),
        ]

    def __str__(self) -> str:
        return f"invitation of {self.email}"

    @property
    def open(self) -> bool:
        return self.accepted_at is None and self.revoked_at is None


class SignUpRequest(models.Model):
    """Someone asked for a researcher account (IDEAREVIEW_SIGNUP). Their account is made
    inactive and waits for an administrator's decision."""

    class Status(models.TextChoices):
        PENDING = "pending", "Waiting for approval"
        APPROVED = "approved", "Approved"
        REJECTED = "rejected", "Rejected"

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="signup_request"
    )
    note = models.TextField(blank=True, max_length=2000)
    via = models.CharField(max_length=40, blank=True)  # "form", or the sign-on provider
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    created_at = models.DateTimeField(default=timezone.now)
    decided_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )

    class Meta:
        ordering = ["created_at"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(status__in=["pending", "approved", "rejected"]),
                name="signup_request_status_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"sign-up of {self.user}"
