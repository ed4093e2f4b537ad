"""Endpoint configurations and the ledger of every LLM call made (also the cache).

The tables keep the names they had when these models lived in `judging`. `LLMCall.run`
names the judge run that paid for a call by its label only: this layer imports neither
app, and normalization's calls have no run.
"""

from __future__ import annotations

import os
from decimal import Decimal

from django.conf import settings
from django.db import models
from django.utils import timezone


class JudgeConfig(models.Model):
    """One judge: an OpenAI-compatible endpoint, a model and its sampling parameters.

    The API key is never stored: `api_key_env` names the environment variable holding it,
    so rows can be exported and shown without leaking secrets.
    """

    name = models.CharField(max_length=120, unique=True)
    base_url = models.CharField(
        max_length=500, blank=True, help_text="Empty: settings.OPENAI_BASE_URL."
    )
    model = models.CharField(max_length=200, blank=True, help_text="Empty: settings.OPENAI_MODEL.")
    api_key_env = models.CharField(
        max_length=100,
        default="OPENAI_API_KEY",
        help_text="Name of the environment variable that holds the key (never the key).",
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
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "judging_judgeconfig"
        constraints = [
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
        ]
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def resolved_base_url(self) -> str:
        return (self.base_url or settings.OPENAI_BASE_URL or "").rstrip("/")

    def resolved_model(self) -> str:
        return self.model or settings.OPENAI_MODEL or ""

    def api_key(self) -> str:
        # Local servers (vLLM, Ollama, llama.cpp, our test server) accept any key, but the
        # openai client refuses an empty one.
        # Only variables on the administrator's allow-list are ever read (an owner could
        # otherwise name DJANGO_SECRET_KEY and have it sent as a bearer token).
        allowed = self.api_key_env in settings.LLM_KEY_ENV_ALLOWLIST
        key = os.environ.get(self.api_key_env, "") if allowed else ""
        if not key and self.api_key_env == "OPENAI_API_KEY":
            key = settings.OPENAI_API_KEY
        return key or "not-needed"

    def is_configured(self) -> bool:
        return bool(self.resolved_base_url() and self.resolved_model())

    def cost(self, input_tokens: int, output_tokens: int) -> Decimal:
        return (
            Decimal(input_tokens) * self.price_input_per_million
            + Decimal(output_tokens) * self.price_output_per_million
        ) / Decimal(1_000_000)


class LLMCall(models.Model):
    """One chat completion, successful or not. The cache key makes it reusable.

    A row with `error` set is a failed call: the cache ignores it and a retry overwrites
    it. `run` is the run that paid for the call; other runs may reuse it from the cache.
    """

    cache_key = models.CharField(max_length=64, unique=True)
    config = models.ForeignKey(
        "llm.JudgeConfig", null=True, blank=True, on_delete=models.SET_NULL, related_name="calls"
    )
    run = models.ForeignKey(
        "judging.JudgeRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="calls"
    )
    base_url = models.CharField(max_length=500)
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
