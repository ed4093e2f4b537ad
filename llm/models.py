"""Endpoint configurations and the ledger of every LLM call made (also the cache).

The tables keep the names they had when these models lived in `judging`. `LLMCall.run`
names the judge run that paid for a call by its label only: this layer imports neither
app, and normalization's calls have no run.
"""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.db import models
from django.utils import timezone


class EndpointKey(models.Model):
    """A researcher's own key for an endpoint they bring, encrypted at rest
    (llm/keystore.py). It is never shown again after it is saved, is used only by
    its owner's judges, and can be removed."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="endpoint_keys"
    )
    label = models.CharField(max_length=120)
    token = models.TextField(help_text="The key, Fernet-encrypted; never shown.")
    hint = models.CharField(max_length=12, blank=True, help_text="Its last characters.")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["label", "id"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "label"], name="endpoint_key_label_per_owner")
        ]

    def __str__(self) -> str:
        return f"{self.label} (…{self.hint})" if self.hint else self.label


class JudgeConfig(models.Model):
    """One judge: an endpoint, a model and its sampling parameters.

    A judge belongs to one study's team (`study`): the study's viewers see it, its editors
    run it, its owners add and remove it, and nobody else learns it exists. Its name is
    unique within the study only. A judge with no study and no creator is the
    administrator's (made from the command line or the admin), offered to every study;
    one with no study but a creator is listed nowhere (docs/architecture.md, "Teams").

    The endpoint is either an administrator's provider (`provider`: its base URL and key
    come from settings.LLM_PROVIDERS, and its key goes only there) or one the researcher
    brings (`base_url`, with `endpoint_key`, their own key, or none). No key is stored
    in plain text. `api_key_env` is what older configs named; it is no longer read.
    """

    name = models.CharField(max_length=120)
    study = models.ForeignKey(
        "studies.Study",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="judge_configs",
        help_text="The study whose team owns this judge; empty: the administrator's.",
    )
    provider = models.CharField(
        max_length=100, blank=True, help_text="An administrator's provider (its name)."
    )
    base_url = models.CharField(
        max_length=500, blank=True, help_text="A researcher's own endpoint (no provider)."
    )
    model = models.CharField(max_length=200, blank=True)
    endpoint_key = models.ForeignKey(
        EndpointKey, null=True, blank=True, on_delete=models.SET_NULL, related_name="configs"
    )
    api_key_env = models.CharField(
        max_length=100,
        blank=True,
        default="",
        help_text="Legacy: the environment variable older configs named; not read.",
    )
    disabled_reason = models.TextField(
        blank=True, help_text="Set when the judge may not run, saying why."
    )
    parameters = models.JSONField(
        default=dict, blank=True, help_text="Sent with every call: temperature, max_tokens, seed…"
    )
    price_input_per_million = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    price_output_per_million = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    concurrency = models.PositiveSmallIntegerField(
        default=4, help_text="Calls in flight at once to this endpoint, per worker process."
    )
    timeout_seconds = models.FloatField(default=120.0)
    max_attempts = models.PositiveSmallIntegerField(
        default=5, help_text="Attempts per call, counting the first, on 429/5xx/timeouts."
    )
    backoff_seconds = models.FloatField(
        default=1.0, help_text="First retry delay; doubles each attempt, with jitter."
    )
    is_baseline = models.BooleanField(
        default=False, help_text="A no-LLM baseline judge (random, longer text)."
    )

    class Reasoning(models.TextChoices):
        AUTO = "auto", "by the server's rule for model names"
        YES = "yes", "a reasoning model"
        NO = "no", "not a reasoning model"

    reasoning = models.CharField(
        max_length=8,
        choices=Reasoning.choices,
        default=Reasoning.AUTO,
        help_text="A reasoning model gets max_completion_tokens and no sampling parameters "
        "(temperature, top_p, penalties); auto: by the LLM_REASONING_MODELS rule.",
    )
    structured_outputs = models.BooleanField(
        default=False,
        help_text="Ask for answers under each method's JSON schema (response_format "
        "json_schema); an endpoint that refuses it is asked without it for the rest of "
        "the run, and the answers are parsed as before.",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "judging_judgeconfig"
        constraints = [
            models.UniqueConstraint(fields=["study", "name"], name="judge_config_name_per_study"),
            models.UniqueConstraint(
                fields=["name"],
                condition=models.Q(study__isnull=True),
                name="judge_config_name_installation",
            ),
            models.CheckConstraint(
                condition=models.Q(concurrency__gte=1), name="judge_config_concurrency_positive"
            ),
            models.CheckConstraint(
                condition=models.Q(max_attempts__gte=1), name="judge_config_max_attempts_positive"
            ),
            models.CheckConstraint(
                condition=models.Q(timeout_seconds__gt=0), name="judge_config_timeout_positive"
            ),
            models.CheckConstraint(
                condition=models.Q(backoff_seconds__gte=0), name="judge_config_backoff_not_negative"
            ),
            models.CheckConstraint(
                condition=models.Q(reasoning__in=["auto", "yes", "no"]),
                name="judge_config_reasoning_valid",
            ),
        ]
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def provider_name(self) -> str:
        """The provider this judge uses: its own, or "default" when it names no endpoint."""
        if self.provider:
            return self.provider
        return "" if self.base_url or self.is_baseline else "default"

    def provider_settings(self) -> dict | None:
        name = self.provider_name()
        return next((p for p in settings.LLM_PROVIDERS if p["name"] == name), None)

    def resolved_base_url(self) -> str:
        if self.provider_name():
            found = self.provider_settings()
            return found["base_url"].rstrip("/") if found else ""
        return self.base_url.rstrip("/")

    def endpoint_shown(self) -> str:
        """The endpoint as pages show it: a provider by name (its URL is the
        administrator's and never shown), a brought endpoint by its URL."""
        if self.provider_name():
            return f"provider {self.provider_name()}"
        return self.base_url.rstrip("/")

    def resolved_model(self) -> str:
        if self.model:
            return self.model
        found = self.provider_settings() if self.provider_name() else None
        models_ = found["models"] if found else []
        return models_[0] if len(models_) == 1 else ""

    def key_source(self) -> str:
        """Where the judge's key comes from, for pages (never the key)."""
        if self.provider_name():
            return f"provider {self.provider_name()}"
        if self.endpoint_key_id:
            return f"the saved key {self.endpoint_key} of its creator"
        return "no key"

    def is_configured(self) -> bool:
        return bool(self.resolved_base_url() and self.resolved_model())

    def is_reasoning_model(self) -> bool:
        """Whether the judge's model is a reasoning model: as the judge says, or (auto)
        when the model's name matches settings.LLM_REASONING_MODELS."""
        import re

        if self.reasoning != self.Reasoning.AUTO:
            return self.reasoning == self.Reasoning.YES
        rule = settings.LLM_REASONING_MODELS
        return bool(rule) and re.search(rule, self.resolved_model()) is not None

    def cost(self, input_tokens: int, output_tokens: int) -> Decimal:
        return (
            Decimal(input_tokens) * self.price_input_per_million
            + Decimal(output_tokens) * self.price_output_per_million
        ) / Decimal(1_000_000)


class LLMCall(models.Model):
    """One chat completion, successful or not. The cache key makes it reusable.

    A row with `error` set is a failed call: the cache ignores it and a retry overwrites
    it. `run` is the run that paid for the call; other runs of the same study may reuse it
    from the cache. `study` is the cache's scope: the study's id is part of the cache key
    (client.cache_key), so no study is answered from another study's calls.
    """

    cache_key = models.CharField(max_length=64, unique=True)
    study = models.ForeignKey(
        "studies.Study",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="llm_calls",
        help_text="The study the call was made for: its cache scope and its spend.",
    )
    config = models.ForeignKey(
        "llm.JudgeConfig", null=True, blank=True, on_delete=models.SET_NULL, related_name="calls"
    )
    run = models.ForeignKey(
        "judging.JudgeRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="calls"
    )
    base_url = models.CharField(max_length=500)
    # Null says "not recorded", which "" (a brought endpoint) cannot.
    provider = models.CharField(  # noqa: DJ001
        max_length=100,
        null=True,
        blank=True,
        help_text="The administrator's provider the call went to, by name; empty: an "
        "endpoint the judge's creator brought, even at a provider's URL. Null: recorded "
        "before calls named it (the spend then goes by the judge, else the URL).",
    )
    model = models.CharField(max_length=200)
    request = models.JSONField(help_text="model, messages and parameters as sent.")
    response_text = models.TextField(blank=True, help_text="The answer exactly as returned.")
    response = models.JSONField(null=True, blank=True, help_text="The whole response body.")
    parsed = models.JSONField(null=True, blank=True)
    parse_error = models.TextField(blank=True)
    prompt_version = models.CharField(max_length=100, blank=True)
    prompt_hash = models.CharField(max_length=64, blank=True)
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    reasoning_tokens = models.PositiveIntegerField(
        default=0,
        help_text="Of the output tokens, those the model spent reasoning (already counted "
        "in output_tokens and billed with them).",
    )
    response_model = models.CharField(
        max_length=200, blank=True, help_text="The model the endpoint says answered."
    )
    system_fingerprint = models.CharField(
        max_length=200, blank=True, help_text="The endpoint's system fingerprint, if it gave one."
    )
    latency_ms = models.FloatField(default=0.0, help_text="Of the attempt that answered.")
    cost = models.DecimalField(max_digits=14, decimal_places=6, default=Decimal("0"))
    error = models.TextField(blank=True)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "judging_llmcall"
        ordering = ["id"]
        indexes = [models.Index(fields=["run", "created_at"], name="judging_llm_run_id_67cb5e_idx")]

    def __str__(self) -> str:
        return f"call {self.pk} ({'error' if self.error else 'ok'})"

    @property
    def ok(self) -> bool:
        return not self.error


class LLMBatch(models.Model):
    """One request file sent through an endpoint's Batch API (`llm/batch.py`): its ids at
    the endpoint and which call each line is (custom id → cache key). The row is written
    as soon as the endpoint accepts the batch, so a worker that dies while it is pending
    leaves what the next one needs to go on polling instead of paying for it twice."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        DONE = "done", "Results read"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    batch_id = models.CharField(max_length=200)
    input_file_id = models.CharField(max_length=200)
    output_file_id = models.CharField(max_length=200, blank=True)
    base_url = models.CharField(max_length=500)
    config = models.ForeignKey(
        JudgeConfig, null=True, blank=True, on_delete=models.SET_NULL, related_name="batches"
    )
    run = models.ForeignKey(
        "judging.JudgeRun",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="llm_batches",
    )
    requests = models.JSONField(default=dict, help_text="custom_id → the call's cache key.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    remote_status = models.CharField(
        max_length=32, blank=True, help_text="The status the endpoint last gave."
    )
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(status__in=["pending", "done", "failed", "cancelled"]),
                name="llm_batch_status_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"batch {self.batch_id} ({self.status})"
