"""Where a judge's requests may go, and with which key, so a judge config cannot be
turned against the server or its administrator's keys.

- **Providers** (settings.LLM_PROVIDERS) are the administrator's endpoints. A judge that
  picks one sends to its base URL only, with its key; the key is bound to the provider's
  scheme, host and port, and the client checks every request against that origin and
  every connection against the addresses the provider's host resolved to
  (llm/client.py). Researchers never type a provider's URL or see its key.
- **Brought endpoints** are a researcher's own URL, with their own key (encrypted at rest,
  llm/keystore.py) or none. The host is resolved once and every address must be
  globally routable (llm/addresses.py), unless its host and port are on
  LLM_HOST_ALLOWLIST; with DEBUG on, loopback is allowed. Connections go to the checked
  addresses only (no second lookup that a rebinding DNS server could answer differently),
  without proxies from the environment, and no redirect is followed.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import threading
import time
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.conf import settings

from . import addresses as rules
from .addresses import IPAddress, Origin, address_kind


class EndpointRefused(ValueError):
    """The endpoint is not allowed; the message says why and what to do."""


@dataclass(frozen=True)
class Provider:
    name: str
    base_url: str
    key_env: str
    models: tuple[str, ...] = ()
    spend_cap: Decimal | None = None

    @property
    def origin(self) -> Origin:
        return rules.origin(self.base_url)

    def key(self) -> str:
        """The provider's key from the environment ('' when unset)."""
        value = os.environ.get(self.key_env, "")
        if not value and self.key_env == "OPENAI_API_KEY":
            value = settings.OPENAI_API_KEY
        return value


def providers() -> list[Provider]:
    return [
        Provider(
            name=p["name"],
            base_url=p["base_url"].rstrip("/"),
            key_env=p["key_env"],
            models=tuple(p.get("models") or ()),
            spend_cap=None if p.get("spend_cap") is None else Decimal(str(p["spend_cap"])),
        )
        for p in settings.LLM_PROVIDERS
    ]


def provider_named(name: str) -> Provider | None:
    return next((p for p in providers() if p.name == name), None)


def provider_choices_text() -> str:
    """The providers, their models and whether each key is set here (never a value)."""
    found = providers()
    if not found:
        return "The administrator has declared no provider (IDEAREVIEW_LLM_PROVIDERS)."
    return "Providers: " + "; ".join(
        f"{p.name} ({', '.join(p.models) or 'any model'}; key "
        f"{'set' if p.key() else 'not set here'})"
        for p in found
    )


@dataclass(frozen=True)
class CheckedEndpoint:
    """An endpoint that passed the check: connect to `addresses` of `origin` only."""

    url: str
    origin: Origin
    addresses: tuple[str, ...] = ()


def _resolve(host: str, port: int) -> list[IPAddress]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise EndpointRefused(f"the endpoint's host {host!r} does not resolve ({exc})") from exc
    found: list[IPAddress] = []
    for info in infos:
        ip = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if ip not in found:
            found.append(ip)
    if not found:
        raise EndpointRefused(f"the endpoint's host {host!r} has no address")
    return found


def allow_list() -> list[rules.Entry]:
    entries = []
    for text in settings.LLM_HOST_ALLOWLIST:
        try:
            entries.append(rules.parse_entry(text))
        except ValueError:
            continue  # an unreadable entry allows nothing
    return entries


def address_refusal(where: Origin, ip: IPAddress, *, listed: bool) -> str:
    """Why a brought endpoint may not connect to `ip` ('' if it may)."""
    if listed:
        return ""
    kind = address_kind(ip)
    if settings.LLM_ONLY_LISTED_HOSTS or (kind and not (kind == "loopback" and settings.DEBUG)):
        return (
            f"the endpoint {where.host}:{where.port} resolves to {ip}"
            + (f", {'an' if kind[0] in 'aeiouAEIOU' else 'a'} {kind} address" if kind else "")
            + ", and is not on the administrator's host allow-list "
            "(IDEAREVIEW_LLM_HOST_ALLOWLIST, host and port)"
        )
    return ""


CHECK_SECONDS = 60.0
"""How long a checked endpoint's addresses are reused: a run's thousands of calls need
one lookup a minute, not one each. The connection goes to these addresses all the while,
so a DNS answer that changes in between is never used."""

_checked: dict[tuple[Any, ...], tuple[float, CheckedEndpoint]] = {}
_checked_lock = threading.Lock()


def _cached(key: tuple[Any, ...], check: Any) -> CheckedEndpoint:
    now = time.monotonic()
    with _checked_lock:
        hit = _checked.get(key)
    if hit is not None and hit[0] > now:
        return hit[1]
    checked = check()
    with _checked_lock:
        _checked[key] = (now + CHECK_SECONDS, checked)
    return checked


def endpoint_check(url: str) -> CheckedEndpoint:
    """Check a researcher's endpoint URL and resolve it once (reused for CHECK_SECONDS);
    EndpointRefused says why it may not be used."""
    key = (
        "brought",
        url.strip(),
        settings.DEBUG,
        tuple(settings.LLM_HOST_ALLOWLIST),
        settings.LLM_ONLY_LISTED_HOSTS,
    )
    return _cached(key, lambda: _endpoint_check(url))


def provider_check(provider: Provider) -> CheckedEndpoint:
    """Resolve a provider's host once (reused for CHECK_SECONDS). The administrator
    declared it, so internal addresses are allowed; the key is bound to what it resolved
    to."""
    key = ("provider", provider.name, provider.base_url)

    def check() -> CheckedEndpoint:
        try:
            where = provider.origin
        except ValueError as exc:
            raise EndpointRefused(f"provider {provider.name!r}: {exc}") from exc
        found = _resolve(where.host, where.port)
        return CheckedEndpoint(provider.base_url, where, tuple(str(a) for a in found))

    return _cached(key, check)


def endpoint_checks_forget() -> None:
    """Forget every checked endpoint (the next call of each looks its host up again)."""
    with _checked_lock:
        _checked.clear()


def _endpoint_check(url: str) -> CheckedEndpoint:
    url = url.strip()
    try:
        where = rules.origin(url)
    except ValueError as exc:
        raise EndpointRefused(str(exc) if "http" in str(exc) else f"bad port ({exc})") from exc
    parts = url.split("://", 1)[1].split("/", 1)[0]
    if "@" in parts:
        raise EndpointRefused("put no credentials in the address")
    found = _resolve(where.host, where.port)
    listed = rules.listed(allow_list(), where, found)
    for ip in found:
        problem = address_refusal(where, ip, listed=listed)
        if problem:
            raise EndpointRefused(problem)
    return CheckedEndpoint(url=url, origin=where, addresses=tuple(str(a) for a in found))


def endpoint_problem(url: str) -> str:
    """Why an endpoint URL may not be used ('' if it may), for forms."""
    try:
        endpoint_check(url)
    except EndpointRefused as exc:
        return str(exc)
    return ""
