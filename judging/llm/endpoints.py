"""What an LLM endpoint typed by a study owner may be, so a judge config cannot be turned
against the server.

- API keys are read only from environment variables on the administrator's allow-list
  (LLM_KEY_ENV_ALLOWLIST); an owner picks one by name and never sees its value, so a
  config naming DJANGO_SECRET_KEY or DATABASE_URL sends nothing.
- An endpoint's host is resolved once and every address it resolves to must be public:
  loopback, private, link-local, shared, multicast, reserved and unspecified addresses
  are refused (IPv4-mapped, 6to4 and NAT64 IPv6 forms by the IPv4 address inside them;
  decimal, octal, hex and short IPv4 forms by what the resolver makes of them), unless
  the host, or a network holding its addresses, is on LLM_HOST_ALLOWLIST. With DEBUG on,
  loopback is allowed (local vLLM, Ollama, llama.cpp, the test server).
- The connection goes to the checked addresses only (no second lookup that a rebinding
  DNS server could answer differently), without proxies from the environment, and no
  redirect is followed.
- The administrator's own OPENAI_BASE_URL is trusted as it is.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


class EndpointRefused(ValueError):
    """The endpoint or key variable is not allowed; the message says why and what to do."""


@dataclass(frozen=True)
class CheckedEndpoint:
    """An endpoint that passed the check: connect to `addresses` only. `trusted` (the
    administrator's own base URL) connects as configured."""

    url: str
    host: str
    addresses: tuple[str, ...] = ()
    trusted: bool = False


def key_env_problem(name: str) -> str:
    """Why a judge may not read its key from the environment variable `name` ('' if it
    may)."""
    allowed = settings.LLM_KEY_ENV_ALLOWLIST
    if name in allowed:
        return ""
    return (
        f"the key variable {name!r} is not one the administrator allows; choose one of "
        f"{', '.join(allowed) or '(none: IDEAREVIEW_LLM_KEY_ENV_ALLOWLIST is empty)'}"
    )


def key_env_choices_text() -> str:
    """The allowed key variables and whether each is set on this server (never a value)."""
    import os

    names = [
        f"{name} ({'set' if os.environ.get(name) else 'not set here'})"
        for name in settings.LLM_KEY_ENV_ALLOWLIST
    ]
    return "Allowed by the administrator: " + (", ".join(names) or "none") + "."


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme, (parts.hostname or "").lower(), port


def _embedded_ipv4(ip: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 form carries (mapped, 6to4, NAT64), else the address."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        if ip.sixtofour is not None:
            return ip.sixtofour
        if ip in NAT64:
            return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip


def address_kind(ip: IPAddress) -> str:
    """'' for a public address, else what it is."""
    ip = _embedded_ipv4(ip)
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local"
    if ip.is_unspecified:
        return "unspecified"
    if ip.is_multicast:
        return "multicast"
    if ip.is_private:
        return "private"
    if not ip.is_global:
        return "reserved"
    return ""


def _listed(host: str, addresses: list[IPAddress]) -> bool:
    for entry in settings.LLM_HOST_ALLOWLIST:
        entry = entry.strip().lower()
        if entry.startswith("*.") and host.endswith(entry[1:]):
            return True
        if entry == host:
            return True
        try:
            network = ipaddress.ip_network(entry.strip("[]"), strict=False)
        except ValueError:
            continue
        if addresses and all(_in(a, network) for a in addresses):
            return True
    return False


def _in(ip: IPAddress, network: ipaddress.IPv4Network | ipaddress.IPv6Network) -> bool:
    return any(a.version == network.version and a in network for a in (ip, _embedded_ipv4(ip)))


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


CHECK_SECONDS = 60.0
"""How long a checked endpoint's addresses are reused: a run's thousands of calls need
one lookup a minute, not one each. The connection goes to these addresses all the while,
so a DNS answer that changes in between is never used."""

_checked: dict[tuple[Any, ...], tuple[float, CheckedEndpoint]] = {}
_checked_lock = threading.Lock()


def endpoint_check(url: str) -> CheckedEndpoint:
    """Check an endpoint URL and resolve it once (reused for CHECK_SECONDS);
    EndpointRefused says why it may not be used."""
    key = (
        url.strip(),
        settings.DEBUG,
        tuple(settings.LLM_HOST_ALLOWLIST),
        settings.LLM_ONLY_LISTED_HOSTS,
        settings.OPENAI_BASE_URL,
    )
    now = time.monotonic()
    with _checked_lock:
        hit = _checked.get(key)
    if hit is not None and hit[0] > now:
        return hit[1]
    checked = _endpoint_check(url)
    with _checked_lock:
        _checked[key] = (now + CHECK_SECONDS, checked)
    return checked


def endpoint_checks_forget() -> None:
    """Forget every checked endpoint (the next call of each looks its host up again)."""
    with _checked_lock:
        _checked.clear()


def _endpoint_check(url: str) -> CheckedEndpoint:
    url = url.strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise EndpointRefused("give an http:// or https:// address")
    if parts.username or parts.password:
        raise EndpointRefused("put credentials in the environment, not in the address")
    host = parts.hostname.lower()
    admin_url = settings.OPENAI_BASE_URL
    if admin_url and _origin(admin_url) == _origin(url):
        return CheckedEndpoint(url=url, host=host, trusted=True)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise EndpointRefused(f"the endpoint's port is not a number ({exc})") from exc
    addresses = _resolve(host, port)
    if not _listed(host, addresses):
        only_listed = settings.LLM_ONLY_LISTED_HOSTS
        for ip in addresses:
            kind = address_kind(ip)
            if only_listed or (kind and not (kind == "loopback" and settings.DEBUG)):
                raise EndpointRefused(
                    f"the endpoint {host} resolves to {ip}"
                    + (f", a {kind} address" if kind else "")
                    + ", and is not on the administrator's host allow-list "
                    "(IDEAREVIEW_LLM_HOST_ALLOWLIST)"
                )
    return CheckedEndpoint(url=url, host=host, addresses=tuple(str(a) for a in addresses))


def endpoint_problem(url: str) -> str:
    """Why an endpoint URL may not be used ('' if it may), for forms."""
    try:
        endpoint_check(url)
    except EndpointRefused as exc:
        return str(exc)
    return ""
