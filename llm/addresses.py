"""Pure rules for LLM endpoints (no Django, no sockets): which IP addresses are globally
routable, and whether an (scheme, host, port) with its resolved addresses is on an
administrator's allow-list.

Globally routable is decided by an explicit rule, not by `ipaddress`'s `is_global` alone,
which calls several internal IPv6 spellings global:

- IPv4: every special-purpose block of the IANA registry is refused (this-network,
  private, shared, loopback, link-local, protocol assignments, documentation, 6to4 relay,
  benchmarking, multicast, reserved, broadcast).
- IPv6: only global unicast (2000::/3) can pass. IPv4-compatible (::/96, e.g.
  `::7f00:1`) and IPv4-mapped (::ffff:0:0/96) addresses are refused whatever they carry:
  a stack may route them to the IPv4 address inside. Site-local fec0::/10, unique local
  fc00::/7, link-local fe80::/10 and multicast ff00::/8 lie outside 2000::/3. The 6to4
  (2002::/16) and NAT64 (64:ff9b::/96) forms are judged by the IPv4 address they carry;
  local-use NAT64 (64:ff9b:1::/48), Teredo, ORCHID, benchmarking and documentation
  prefixes are refused.

Allow-list entries name a host and a port: `host`, `host:port`, `host:*` (any port),
`*.domain[:port]`, an address or a network (`10.0.0.0/8:8000`, `[fd00::/8]:8000`,
`[::1]:8000`), optionally behind a scheme (`https://api.lab`). Without a port an entry
means the default port of the URL's scheme (80 for http, 443 for https), so listing
`127.0.0.1` does not open the database on 5432 or the broker on 6379.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

DEFAULT_PORTS = {"http": 80, "https": 443}

_V4_SPECIAL: tuple[tuple[str, str], ...] = (
    ("0.0.0.0/8", "unspecified"),
    ("10.0.0.0/8", "private"),
    ("100.64.0.0/10", "shared"),
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link-local"),
    ("172.16.0.0/12", "private"),
    ("192.0.0.0/24", "reserved"),
    ("192.0.2.0/24", "documentation"),
    ("192.88.99.0/24", "reserved"),
    ("192.168.0.0/16", "private"),
    ("198.18.0.0/15", "reserved"),
    ("198.51.100.0/24", "documentation"),
    ("203.0.113.0/24", "documentation"),
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved"),
)
V4_SPECIAL: tuple[tuple[ipaddress.IPv4Network, str], ...] = tuple(
    (ipaddress.IPv4Network(net), kind) for net, kind in _V4_SPECIAL
)

GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")
IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")
IPV4_MAPPED = ipaddress.IPv6Network("::ffff:0:0/96")
NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
SIX_TO_FOUR = ipaddress.IPv6Network("2002::/16")
_V6_SPECIAL: tuple[tuple[str, str], ...] = (
    ("64:ff9b:1::/48", "local-use NAT64"),
    ("2001::/32", "Teredo"),
    ("2001:2::/48", "reserved"),
    ("2001:10::/28", "reserved"),
    ("2001:20::/28", "reserved"),
    ("2001:db8::/32", "documentation"),
    ("3fff::/20", "documentation"),
    ("fec0::/10", "site-local"),
    ("fc00::/7", "private"),
    ("fe80::/10", "link-local"),
    ("ff00::/8", "multicast"),
)
V6_SPECIAL: tuple[tuple[ipaddress.IPv6Network, str], ...] = tuple(
    (ipaddress.IPv6Network(net), kind) for net, kind in _V6_SPECIAL
)


def address_kind(ip: IPAddress) -> str:
    """'' for a globally routable address, else what it is (e.g. 'loopback',
    'IPv4-mapped', 'site-local')."""
    if isinstance(ip, ipaddress.IPv4Address):
        for network, kind in V4_SPECIAL:
            if ip in network:
                return kind
        return "" if ip.is_global else "reserved"
    if ip == ipaddress.IPv6Address("::1"):
        return "loopback"
    if ip == ipaddress.IPv6Address("::"):
        return "unspecified"
    if ip in IPV4_MAPPED:
        return "IPv4-mapped"
    if ip in IPV4_COMPATIBLE:
        return "IPv4-compatible"
    if ip in NAT64 or ip in SIX_TO_FOUR:
        inner = embedded_ipv4(ip)
        kind = address_kind(inner)
        form = "NAT64" if ip in NAT64 else "6to4"
        return f"{form} form of a {kind} address" if kind else ""
    for network6, kind in V6_SPECIAL:
        if ip in network6:
            return kind
    if ip not in GLOBAL_UNICAST:
        return "reserved"
    return "" if ip.is_global else "reserved"


def embedded_ipv4(ip: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 form carries (mapped, compatible, 6to4, NAT64), else the
    address itself."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        if ip.sixtofour is not None:
            return ip.sixtofour
        if ip in NAT64 or (ip in IPV4_COMPATIBLE and int(ip) > 1):
            return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip


def parse_ip(text: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(text.strip("[]").split("%", 1)[0])
    except ValueError:
        return None


@dataclass(frozen=True)
class Origin:
    scheme: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


def origin(url: str) -> Origin:
    """Scheme, lower-case host and port (the scheme's default when absent) of a URL;
    ValueError for a URL without an http(s) scheme and host, or with a bad port."""
    parts = urlsplit(url.strip())
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        raise ValueError("give an http:// or https:// address")
    port = parts.port  # ValueError for a port out of range or not a number
    return Origin(parts.scheme, parts.hostname.lower(), port or DEFAULT_PORTS[parts.scheme])


@dataclass(frozen=True)
class Entry:
    """One allow-list entry: a name, `*.domain` or network, and a port (None: the scheme's
    default port; 0: any port)."""

    scheme: str
    host: str
    network: Network | None
    port: int | None


def parse_entry(text: str) -> Entry:
    """ValueError for an entry that cannot be read."""
    text = text.strip().lower()
    scheme = ""
    if "://" in text:
        scheme, _, text = text.partition("://")
        if scheme not in DEFAULT_PORTS:
            raise ValueError(f"{scheme!r} is not http or https")
    text = text.rstrip("/")
    port: int | None = None
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        if rest:
            if not rest.startswith(":"):
                raise ValueError("expected :port after ]")
            port = _port(rest[1:])
    elif text.count(":") == 1:
        host, _, raw = text.partition(":")
        port = _port(raw)
    else:
        host = text  # a bare name, IPv4 address or network, or an unbracketed IPv6 one
    if not host:
        raise ValueError("no host")
    network: Network | None = None
    if not host.startswith("*."):
        try:
            network = ipaddress.ip_network(host, strict=False)
        except ValueError:
            network = None
    return Entry(scheme, host, network, port)


def _port(raw: str) -> int:
    if raw == "*":
        return 0
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise ValueError(f"{raw!r} is not a port")
    return int(raw)


def entry_matches(entry: Entry, where: Origin, addresses: list[IPAddress]) -> bool:
    """Whether `where` (resolving to `addresses`) is covered by the entry: the scheme (if
    the entry names one), the port, and the host name or every resolved address."""
    if entry.scheme and entry.scheme != where.scheme:
        return False
    wanted = DEFAULT_PORTS[where.scheme] if entry.port is None else entry.port
    if wanted and wanted != where.port:
        return False
    if entry.network is not None:
        return bool(addresses) and all(_in(a, entry.network) for a in addresses)
    if entry.host.startswith("*."):
        return where.host.endswith(entry.host[1:])
    return entry.host == where.host


def _in(ip: IPAddress, network: Network) -> bool:
    # An IPv4-mapped address is the IPv4 host itself (a dual-stack socket); the other
    # forms that carry an IPv4 address (compatible, 6to4, NAT64) reach other machines or
    # translators, so a listed IPv4 network does not cover them.
    forms: tuple[IPAddress, ...] = (ip,)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        forms = (ip, ip.ipv4_mapped)
    return any(a.version == network.version and a in network for a in forms)


def listed(entries: list[Entry], where: Origin, addresses: list[IPAddress]) -> bool:
    return any(entry_matches(entry, where, addresses) for entry in entries)
