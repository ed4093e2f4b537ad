"""The judge client: any OpenAI-compatible endpoint through the `openai` package.

`complete(config, messages, run=...)` is the whole story for one call: look the call up
in the cache, check the run's budget, send it with retries, store it as an `LLMCall`.
The judge run engine (`judging/services/engine.py`) uses the same three steps separately so that only the
HTTP part runs in worker threads and every database write stays on the calling thread:

    prepared = prepare(config, messages, ...)   # cache key and request, no I/O
    call = lookup(prepared)                     # database: a hit makes no HTTP call
    attempt = send(prepared)                    # HTTP only, thread-safe, retries inside
    call = record(prepared, attempt, run=run)   # database

Cache key: SHA-256 over the base URL, the model, the messages and the parameters (and an
optional salt, used to tell k samples of the same prompt apart), and the study the call
is made for: a call answers only its own study's later calls, never another team's
(docs/architecture.md, "Teams"). Errored calls are stored too but never answer from the
cache; the next attempt overwrites them.

Retries: 429, 408, 409, 5xx, timeouts and connection errors are retried up to
`config.max_attempts` attempts in all, with exponential backoff (`backoff_seconds`
doubled per attempt, capped at 60 s) and jitter (×0.5–1.0), or the server's
Retry-After when it asks for longer. Other 4xx errors are not retried: they will not
get better by themselves.

Reasoning models (`JudgeConfig.is_reasoning_model`): the parameters are rewritten before
anything else sees them: `max_tokens` becomes `max_completion_tokens` and the sampling
parameters reasoning models refuse (`temperature`, `top_p`, the penalties) are left out,
so the cache key and the stored request are what was sent. The tokens the model spent
reasoning (`usage.completion_tokens_details.reasoning_tokens`) are stored with the call;
they are part of its output tokens and priced with them.

Structured outputs: a caller may pass `response_format` among the parameters (the judge
engine does, with the method's JSON schema, for judges with `structured_outputs`). An
endpoint that answers such a request with 400 or 422 is asked again at once without it;
the attempt says so (`schema_refused`), and the stored request is the one that answered.

Every answer's model name and `system_fingerprint` are stored with the call, so a
report can say which model versions actually answered.

Concurrency: at most `config.concurrency` requests are in flight to one base URL **per
worker process** (a semaphore shared by every run and thread in the process, held only
while a request is on the wire, not while backing off). N Celery worker processes can
therefore have N × limit requests in flight; size the limit, or the worker count, for
that. No Redis is needed, which matters because the default broker is the filesystem.
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import httpcore2
import httpx2
from django.db import IntegrityError, connection, transaction
from django.db.models import Sum

if TYPE_CHECKING:
    import openai

from . import addresses as rules
from .endpoints import (
    CheckedEndpoint,
    EndpointRefused,
    address_refusal,
    allow_list,
    endpoint_check,
    provider_check,
    provider_named,
)
from .models import JudgeConfig, LLMCall
from .spend import provider_calls
from .wire import METHOD_HEADER, prompt_hash

__all__ = [
    "BudgetExhausted",
    "JudgeNotConfigured",
    "METHOD_HEADER",
    "Attempt",
    "Prepared",
    "budget_problem",
    "parameters_problem",
    "reasoning_parameters",
    "provider_cap_problem",
    "cache_key",
    "complete",
    "lookup",
    "prepare",
    "record",
    "send",
]

RETRY_STATUSES = frozenset({408, 409, 429})

_SET_BY_US = {
    "model": "the model is the judge's own field",
    "messages": "the messages come from the method's prompt",
    "extra_headers": "headers are set by the server (keys never travel in parameters)",
    "extra_query": "the endpoint's query string is fixed",
    "timeout": "the timeout is the judge's own field",
    "stream": "answers are read whole, not streamed",
    "stream_options": "answers are read whole, not streamed",
}
_NUMBERS = {"temperature", "top_p", "frequency_penalty", "presence_penalty"}
_INTEGERS = {"max_tokens", "max_completion_tokens", "seed", "n", "top_logprobs"}
REASONING_REFUSES = ("temperature", "top_p", "presence_penalty", "frequency_penalty")
"""Sampling parameters reasoning models refuse; left out of their requests."""
SCHEMA_REFUSALS = frozenset({400, 422})
"""Statuses with which an endpoint refuses a request's response_format."""


def reasoning_parameters(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters as a reasoning model takes them: `max_tokens` renamed
    `max_completion_tokens` (unless that is set already) and no sampling parameters."""
    out = {k: v for k, v in parameters.items() if k not in REASONING_REFUSES}
    if "max_tokens" in out:
        limit = out.pop("max_tokens")
        out.setdefault("max_completion_tokens", limit)
    return out


@functools.cache
def _accepted_parameters() -> frozenset[str]:
    import inspect

    from openai.resources.chat.completions import Completions

    return frozenset(inspect.signature(Completions.create).parameters) - {"self"}


def parameters_problem(parameters: Mapping[str, Any]) -> str:
    """Why these parameters cannot be sent with every call ('' if they can): each must be
    one the client's `chat.completions.create` accepts and we do not set ourselves, with
    a value of the right type."""
    accepted = _accepted_parameters()
    for name, value in parameters.items():
        if name in _SET_BY_US:
            return f"{name!r} cannot be set here: {_SET_BY_US[name]}"
        if name not in accepted:
            return (
                f"{name!r} is not a parameter of the chat completions API; put an "
                'endpoint-specific one inside "extra_body"'
            )
        if name in _NUMBERS and (isinstance(value, bool) or not isinstance(value, int | float)):
            return f"{name!r} must be a number"
        if name in _INTEGERS and (isinstance(value, bool) or not isinstance(value, int)):
            return f"{name!r} must be a whole number"
        if name == "extra_body" and not isinstance(value, dict):
            return "'extra_body' must be a JSON object"
    return ""


MAX_BACKOFF = 60.0


class BudgetExhausted(Exception):
    """The run may not make another paid call. The run stops cleanly, resumable later."""


class JudgeNotConfigured(Exception):
    """No endpoint or model: LLM judges are off until one is configured."""


def cache_key(
    base_url: str,
    model: str,
    messages: Sequence[Mapping[str, Any]],
    parameters: Mapping[str, Any],
    salt: str = "",
    study_id: int | None = None,
) -> str:
    material: dict[str, Any] = {
        "base_url": base_url.rstrip("/"),
        "model": model,
        "messages": [dict(m) for m in messages],
        "parameters": dict(parameters),
    }
    if salt:
        material["salt"] = salt
    if study_id is not None:
        material["study"] = int(study_id)
    canonical = json.dumps(material, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Prepared:
    """Everything `send` needs, copied out of the config so threads never touch the ORM."""

    config_id: int | None
    base_url: str
    model: str
    api_key: str
    parameters: dict[str, Any]
    messages: list[dict[str, str]]
    cache_key: str
    prompt_version: str
    prompt_hash: str
    timeout: float
    max_attempts: int
    backoff: float
    concurrency: int
    price_in: Decimal
    price_out: Decimal
    method_key: str = ""
    """Sent as the METHOD_HEADER so a scripted server can answer by it; not in the cache
    key (the messages already determine what is asked)."""
    addresses: tuple[str, ...] = ()
    """The checked addresses of the endpoint: connections go to these only."""
    origin: str = ""
    """scheme://host:port the key is bound to: a request anywhere else is refused."""
    provider: str = ""
    """The administrator's provider this call goes to ('' for a brought endpoint)."""
    study_id: int | None = None
    """The study the call is made for: in the cache key, and stored with the call."""
    reasoning: bool = False
    """A reasoning model's call (its parameters are already rewritten for it)."""

    @property
    def request(self) -> dict[str, Any]:
        return {"model": self.model, "messages": self.messages, **self.parameters}

    def cost(self, input_tokens: int, output_tokens: int) -> Decimal:
        return (
            Decimal(input_tokens) * self.price_in + Decimal(output_tokens) * self.price_out
        ) / Decimal(1_000_000)


@dataclass
class Attempt:
    """What came back from the endpoint after all attempts."""

    text: str = ""
    response: dict[str, Any] | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    latency_ms: float = 0.0
    error: str = ""
    status_code: int | None = None
    attempts: int = 0
    delays: list[float] = field(default_factory=list)
    reasoning_tokens: int = 0
    response_model: str = ""
    system_fingerprint: str = ""
    schema_refused: str = ""
    """Why the endpoint refused the request's response_format ('' if it did not, or none
    was sent); the answer, if any, is to the request without it."""

    def request(self, prepared: Prepared) -> dict[str, Any]:
        """The request as last sent (without response_format after a refusal)."""
        request = prepared.request
        if self.schema_refused:
            request.pop("response_format", None)
        return request


def prepare(
    config: JudgeConfig,
    messages: Sequence[Mapping[str, str]],
    *,
    prompt_version: str = "",
    salt: str = "",
    parameters: Mapping[str, Any] | None = None,
    method_key: str | None = None,
    study_id: int | None = None,
) -> Prepared:
    """`parameters` are merged over the config's (e.g. a per-sample seed). `method_key`
    (default: the prompt's name, `prompt_version` without its `@version`) says what kind of
    request this is. `study_id` is the study the call is for (default: the judge's own
    study); the cache answers only from that study's calls."""
    base_url, model = config.resolved_base_url(), config.resolved_model()
    if config.disabled_reason:
        raise JudgeNotConfigured(f"judge {config.name!r} is disabled: {config.disabled_reason}")
    name = config.provider_name()
    if name and provider_named(name) is None:
        raise JudgeNotConfigured(
            f"judge {config.name!r}: there is no provider {name!r} on this server "
            "(IDEAREVIEW_LLM_PROVIDERS)"
        )
    if not base_url or not model:
        raise JudgeNotConfigured(
            f"judge {config.name!r} has no endpoint or model; choose a provider and a model, "
            "or give your own endpoint's base URL"
        )
    endpoint, api_key, provider = _endpoint_and_key(config, model)
    params = {**(config.parameters or {}), **(parameters or {})}
    problem = parameters_problem(params)
    if problem:  # a config saved before parameters were checked
        raise JudgeNotConfigured(f"judge {config.name!r}: parameters: {problem}")
    reasoning = config.is_reasoning_model()
    if reasoning:
        params = reasoning_parameters(params)
    msgs = [dict(m) for m in messages]
    study_id = study_id if study_id is not None else config.study_id
    return Prepared(
        config_id=config.pk,
        base_url=base_url,
        model=model,
        api_key=api_key,
        parameters=params,
        messages=msgs,
        cache_key=cache_key(base_url, model, msgs, params, salt, study_id),
        prompt_version=prompt_version,
        prompt_hash=prompt_hash(msgs),
        timeout=float(config.timeout_seconds),
        max_attempts=max(1, int(config.max_attempts)),
        backoff=max(0.0, float(config.backoff_seconds)),
        concurrency=max(1, int(config.concurrency)),
        price_in=Decimal(config.price_input_per_million),
        price_out=Decimal(config.price_output_per_million),
        method_key=prompt_version.partition("@")[0] if method_key is None else method_key,
        addresses=endpoint.addresses,
        origin=str(endpoint.origin),
        provider=provider,
        study_id=study_id,
        reasoning=reasoning,
    )


def _endpoint_and_key(config: JudgeConfig, model: str) -> tuple[CheckedEndpoint, str, str]:
    """Where the judge's calls go and the key they carry: a provider's own key to the
    provider's origin, a researcher's own key (or none) to their checked endpoint."""
    name = config.provider_name()
    try:
        if name:
            provider = provider_named(name)
            if provider is None:
                raise EndpointRefused(f"there is no provider {name!r} on this server")
            if provider.models and model not in provider.models:
                raise EndpointRefused(
                    f"provider {name!r} allows the models {', '.join(provider.models)}, "
                    f"not {model!r}"
                )
            # Local servers accept any key, but the openai client refuses an empty one.
            return provider_check(provider), provider.key() or "not-needed", name
        endpoint = endpoint_check(config.resolved_base_url())
    except EndpointRefused as exc:
        raise JudgeNotConfigured(f"judge {config.name!r}: {exc}") from exc
    key = ""
    if config.endpoint_key_id:
        from .keystore import KeyUnreadable, endpoint_key_value

        owner = config.endpoint_key.owner_id  # type: ignore[union-attr]
        if owner != config.created_by_id:
            raise JudgeNotConfigured(f"judge {config.name!r}: the key belongs to someone else")
        try:
            key = endpoint_key_value(config.endpoint_key)  # type: ignore[arg-type]
        except KeyUnreadable as exc:
            raise JudgeNotConfigured(f"judge {config.name!r}: {exc}") from exc
    return endpoint, key or "not-needed", ""


def lookup(prepared: Prepared) -> LLMCall | None:
    """The stored successful call with this key, if any."""
    # Most lookups miss; a bare indexed query costs a tenth of the ORM's on that path.
    with connection.cursor() as cursor:
        cursor.execute(_HIT_SQL.format(table=LLMCall._meta.db_table), [prepared.cache_key])
        row = cursor.fetchone()
    return LLMCall.objects.get(pk=row[0]) if row else None


_HIT_SQL = "SELECT id FROM {table} WHERE cache_key = %s AND error = ''"


# --- HTTP, thread-safe ---------------------------------------------------------------

_lock = threading.Lock()
_clients: dict[tuple[str, str, float, tuple[str, ...], str, str], openai.OpenAI] = {}
_semaphores: dict[str, tuple[int, threading.BoundedSemaphore]] = {}


class _PinnedBackend(httpcore2.SyncBackend):
    """Opens every connection to the endpoint's checked addresses, never to a fresh DNS
    answer (TLS still verifies the certificate against the endpoint's name), and only for
    the origin the key is bound to. A brought endpoint's address is checked again here,
    at send time, against the address rules and the allow-list."""

    def __init__(self, prepared: Prepared):
        self.addresses = prepared.addresses
        self.origin = rules.origin(prepared.origin)
        self.brought = not prepared.provider

    def connect_tcp(self, host: str, port: int, *args: Any, **kwargs: Any) -> Any:
        if host.strip("[]").lower() != self.origin.host or port != self.origin.port:
            raise httpcore2.ConnectError(f"refused: {host}:{port} is not {self.origin}")
        error: Exception | None = None
        for address in self.addresses:
            ip = rules.parse_ip(address)
            if ip is None:
                continue
            if self.brought:
                listed = rules.listed(allow_list(), self.origin, [ip])
                problem = address_refusal(self.origin, ip, listed=listed)
                if problem:
                    error = httpcore2.ConnectError(f"refused: {problem}")
                    continue
            try:
                return super().connect_tcp(address, port, *args, **kwargs)
            except httpcore2.ConnectError as exc:
                error = exc
        raise error or httpcore2.ConnectError(f"no checked address for {host}")


class _BoundTransport(httpx2.HTTPTransport):
    """Sends a request only to the origin the call's key is bound to (a changed base URL
    or any other request through this client is refused before it leaves)."""

    def __init__(self, origin: rules.Origin, **kwargs: Any):
        super().__init__(**kwargs)
        self.bound = origin

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        url = request.url
        try:
            where = rules.origin(str(url))
        except ValueError as exc:
            raise httpx2.ConnectError(f"refused: {exc}", request=request) from exc
        if where != self.bound:
            raise httpx2.ConnectError(f"refused: {where} is not {self.bound}", request=request)
        return super().handle_request(request)


@functools.cache
def _tls_context() -> Any:
    """One TLS context (the system's certificate authorities, hostnames checked) for every
    client of the process: each new client would otherwise load the authorities again,
    and a run against a new endpoint or key makes a new client."""
    return httpx2.create_ssl_context(trust_env=False)


def _pinned_http_client(prepared: Prepared) -> httpx2.Client:
    # No proxy from the environment (it would do its own lookup) and no redirects (a
    # redirect could name any address).
    transport = _BoundTransport(
        rules.origin(prepared.origin), trust_env=False, verify=_tls_context()
    )
    transport._pool._network_backend = _PinnedBackend(prepared)  # type: ignore[union-attr]
    return httpx2.Client(
        transport=transport, trust_env=False, follow_redirects=False, timeout=prepared.timeout
    )


def _openai() -> Any:
    """The OpenAI SDK, imported when the first call is made rather than when the app loads:
    it is one of the costliest imports of the app, which every web and worker process would
    otherwise pay at start-up whether or not it ever calls a model (docs/measurements.md)."""
    import openai

    return openai


def _client(prepared: Prepared) -> openai.OpenAI:
    sdk = _openai()
    key = (
        prepared.base_url,
        prepared.api_key,
        prepared.timeout,
        prepared.addresses,
        prepared.origin,
        prepared.provider,
    )
    with _lock:
        client = _clients.get(key)
        if client is None:
            # Retries are ours (they must be counted and bounded per config).
            client = sdk.OpenAI(
                base_url=prepared.base_url,
                api_key=prepared.api_key,
                timeout=prepared.timeout,
                max_retries=0,
                http_client=_pinned_http_client(prepared),
            )
            _clients[key] = client
        return client


def endpoint_semaphore(base_url: str, limit: int) -> threading.BoundedSemaphore:
    """The process-wide in-flight limit for one endpoint; a changed limit replaces it."""
    with _lock:
        current = _semaphores.get(base_url)
        if current is None or current[0] != limit:
            current = (limit, threading.BoundedSemaphore(limit))
            _semaphores[base_url] = current
        return current[1]


def _retry_after(exc: openai.APIStatusError) -> float | None:
    try:
        value = exc.response.headers.get("retry-after")
        return float(value) if value is not None else None
    except (TypeError, ValueError, AttributeError):
        return None


def _backoff(prepared: Prepared, attempt: int, retry_after: float | None) -> float:
    delay = min(MAX_BACKOFF, prepared.backoff * 2 ** (attempt - 1))
    delay *= 0.5 + random.random() / 2  # jitter: spread out clients that failed together
    if retry_after is not None:
        delay = max(delay, min(retry_after, MAX_BACKOFF))
    return delay


def _headers(prepared: Prepared) -> dict[str, str] | None:
    return {METHOD_HEADER: prepared.method_key} if prepared.method_key else None


def send(prepared: Prepared, *, sleep: Callable[[float], None] = time.sleep) -> Attempt:
    """Make the call with retries. Never raises for API errors: they end up in `error`."""
    sdk = _openai()
    client = _client(prepared)
    semaphore = endpoint_semaphore(prepared.base_url, prepared.concurrency)
    result = Attempt()
    for attempt in range(1, prepared.max_attempts + 1):
        result.attempts = attempt
        retry_after: float | None = None
        retryable = False
        with semaphore:
            started = time.perf_counter()
            try:
                completion = _create(client, prepared, result)
            except sdk.APIStatusError as exc:
                result.status_code = exc.status_code
                result.error = f"HTTP {exc.status_code}: {_short(exc.message)}"
                retryable = exc.status_code in RETRY_STATUSES or exc.status_code >= 500
                retry_after = _retry_after(exc)
            except sdk.APITimeoutError:
                result.status_code = None
                result.error = f"timed out after {prepared.timeout:g} s"
                retryable = True
            except sdk.APIConnectionError as exc:
                result.status_code = None
                cause = exc.__cause__ or exc
                result.error = f"connection error: {_short(str(cause) or str(exc))}"
                retryable = True
            except sdk.OpenAIError as exc:  # e.g. a body that is not a completion
                result.error = f"{type(exc).__name__}: {_short(str(exc))}"
            else:
                result.latency_ms = (time.perf_counter() - started) * 1000
                return _success(result, completion)
            finally:
                result.latency_ms = (time.perf_counter() - started) * 1000
        if not retryable or attempt == prepared.max_attempts:
            break
        delay = _backoff(prepared, attempt, retry_after)
        result.delays.append(delay)
        sleep(delay)
    return result


def _create(client: openai.OpenAI, prepared: Prepared, result: Attempt) -> Any:
    """One request; when the endpoint refuses its response_format, the same request
    again without it (once per call: `result.schema_refused` remembers the refusal)."""
    sdk = _openai()
    messages: Any = prepared.messages  # plain dicts; the SDK's TypedDicts agree
    params = dict(prepared.parameters)
    if result.schema_refused:
        params.pop("response_format", None)
    try:
        return client.chat.completions.create(
            model=prepared.model, messages=messages, extra_headers=_headers(prepared), **params
        )
    except sdk.APIStatusError as exc:
        if exc.status_code not in SCHEMA_REFUSALS or "response_format" not in params:
            raise
        result.schema_refused = f"HTTP {exc.status_code}: {_short(exc.message, 200)}"
    params.pop("response_format")
    return client.chat.completions.create(
        model=prepared.model, messages=messages, extra_headers=_headers(prepared), **params
    )


def _short(text: str, limit: int = 500) -> str:
    text = str(text)
    return text if len(text) <= limit else text[:limit] + "…"


def _success(result: Attempt, completion: Any) -> Attempt:
    result.error = ""
    result.status_code = 200
    try:
        choices = completion.choices or []
        message = choices[0].message if choices else None
        result.text = (message.content if message is not None else None) or ""
        usage = completion.usage
        result.input_tokens = int(getattr(usage, "prompt_tokens", 0) or 0) if usage else 0
        result.output_tokens = int(getattr(usage, "completion_tokens", 0) or 0) if usage else 0
        details = getattr(usage, "completion_tokens_details", None) if usage else None
        result.reasoning_tokens = int(getattr(details, "reasoning_tokens", 0) or 0)
        result.response_model = str(getattr(completion, "model", "") or "")[:200]
        result.system_fingerprint = str(getattr(completion, "system_fingerprint", "") or "")[:200]
        result.response = completion.model_dump(mode="json", exclude_none=True)
        if not choices:
            result.error = "the response has no choices"
    except (AttributeError, TypeError, ValueError) as exc:
        result.error = f"malformed completion: {exc}"
    return result


# --- Database ------------------------------------------------------------------------


def record(
    prepared: Prepared,
    attempt: Attempt,
    *,
    run: Any = None,
    parsed: Any = None,
    parse_error: str = "",
) -> LLMCall:
    """Store the call (a failed one replaces an earlier failure with the same key)."""
    values = {
        "config_id": prepared.config_id,
        "study_id": prepared.study_id,
        "run": run,
        "base_url": prepared.base_url,
        # Whose endpoint it was: a researcher may bring one at a provider's very URL.
        "provider": prepared.provider,
        "model": prepared.model,
        "request": attempt.request(prepared),
        "response_text": attempt.text,
        "response": attempt.response,
        "parsed": parsed,
        "parse_error": parse_error,
        "prompt_version": prepared.prompt_version,
        "prompt_hash": prepared.prompt_hash,
        "input_tokens": attempt.input_tokens,
        "output_tokens": attempt.output_tokens,
        "reasoning_tokens": attempt.reasoning_tokens,
        "response_model": attempt.response_model,
        "system_fingerprint": attempt.system_fingerprint,
        "latency_ms": attempt.latency_ms,
        # A failed call is paid for only when the server reported usage.
        "cost": prepared.cost(attempt.input_tokens, attempt.output_tokens),
        "error": attempt.error,
        "status_code": attempt.status_code,
        "attempts": attempt.attempts,
    }
    try:
        with transaction.atomic():
            return LLMCall.objects.create(cache_key=prepared.cache_key, **values)
    except IntegrityError:
        pass
    existing = LLMCall.objects.get(cache_key=prepared.cache_key)
    if existing.ok:
        # Another run stored the same call while ours was in flight; keep the first.
        return existing
    values["attempts"] = existing.attempts + attempt.attempts
    for k, v in values.items():
        setattr(existing, k, v)
    existing.save()
    return existing


def budget_problem(
    run: Any,
    *,
    calls: int,
    cost: Decimal,
    in_flight: int = 0,
    cost_per_call: Decimal | None = None,
) -> str | None:
    """Why one more paid call would break the run's budget, or None if it may go ahead.

    `calls`/`cost` are what the run has spent; calls in flight count as spent, at the
    average cost per call so far, so a concurrent run stops before it overshoots.
    """
    if run is None:
        return None
    if run.budget_calls is not None and calls + in_flight >= run.budget_calls:
        return f"budget reached: {calls + in_flight} of {run.budget_calls} calls made"
    if run.budget_cost is not None:
        pending = (cost_per_call or Decimal(0)) * in_flight
        next_call = cost_per_call or Decimal(0)
        if cost >= run.budget_cost or cost + pending + next_call > run.budget_cost:
            return f"budget reached: {cost:.4f} of {run.budget_cost:.4f} spent"
    return None


CAP_CHECK_SECONDS = 5.0
_spent: dict[str, tuple[float, Decimal]] = {}


def provider_cap_problem(prepared: Prepared) -> str | None:
    """Why one more call would exceed its provider's spending cap (all judges' calls to
    the provider count, a researcher's own endpoint at its URL does not: `provider_calls`;
    the sum is re-read at most every CAP_CHECK_SECONDS)."""
    provider = provider_named(prepared.provider) if prepared.provider else None
    if provider is None or provider.spend_cap is None:
        return None
    now = time.monotonic()
    with _lock:
        hit = _spent.get(provider.name)
    if hit is None or hit[0] < now:
        calls = provider_calls(provider.name, prepared.base_url)
        total = calls.aggregate(s=Sum("cost"))["s"]
        hit = (now + CAP_CHECK_SECONDS, Decimal(total or 0))
        with _lock:
            _spent[provider.name] = hit
    if hit[1] >= provider.spend_cap:
        return (
            f"provider {provider.name!r} has reached its spending cap "
            f"({hit[1]:.4f} of {provider.spend_cap:.4f})"
        )
    return None


def run_spend(run: Any) -> tuple[int, Decimal]:
    """Calls this run paid for and their cost, from the rows (never from counters)."""
    agg = LLMCall.objects.filter(run=run).aggregate(cost=Sum("cost"))
    return LLMCall.objects.filter(run=run).count(), Decimal(agg["cost"] or 0)


def complete(
    config: JudgeConfig,
    messages: Sequence[Mapping[str, str]],
    *,
    run: Any = None,
    prompt_version: str = "",
    salt: str = "",
    parse: Callable[[str], Any] | None = None,
    study_id: int | None = None,
) -> LLMCall:
    """One call, from the cache when possible. Raises BudgetExhausted before a paid call
    that the run's budget does not allow. API failures are returned as an LLMCall with
    `error` set, not raised."""
    if study_id is None and run is not None:
        study_id = run.study_id
    prepared = prepare(
        config, messages, prompt_version=prompt_version, salt=salt, study_id=study_id
    )
    cached = lookup(prepared)
    if cached is not None:
        return cached
    capped = provider_cap_problem(prepared)
    if capped:
        raise BudgetExhausted(capped)
    if run is not None:
        calls, cost = run_spend(run)
        problem = budget_problem(
            run, calls=calls, cost=cost, cost_per_call=(cost / calls) if calls else None
        )
        if problem:
            raise BudgetExhausted(problem)
    attempt = send(prepared)
    parsed, parse_error = None, ""
    if parse is not None and not attempt.error:
        parsed, parse_error = parse(attempt.text)
    return record(prepared, attempt, run=run, parsed=parsed, parse_error=parse_error)
