"""The pure endpoint rules: which addresses are globally routable, and port-aware
allow-list matching (no sockets, no Django)."""

from __future__ import annotations

import ipaddress

import pytest

from llm.addresses import address_kind, listed, origin, parse_entry

REFUSED = [
    "127.0.0.1",
    "10.1.2.3",
    "100.64.0.1",
    "169.254.169.254",
    "172.31.255.255",
    "192.168.0.1",
    "0.0.0.0",
    "198.18.0.1",
    "224.0.0.1",
    "255.255.255.255",
    "::1",
    "::",
    "::7f00:1",  # IPv4-compatible 127.0.0.1
    "::a9fe:a9fe",  # IPv4-compatible 169.254.169.254
    "::808:808",  # IPv4-compatible, even of a public address
    "::ffff:8.8.8.8",  # IPv4-mapped, even of a public address
    "::ffff:127.0.0.1",
    "fec0::1",  # site-local
    "fd00::1",
    "fe80::1",
    "ff02::1",
    "64:ff9b::7f00:1",  # NAT64 of loopback
    "64:ff9b::a9fe:a9fe",
    "64:ff9b:1::1",  # local-use NAT64
    "2002:7f00:1::1",  # 6to4 of loopback
    "2002:a00:1::1",  # 6to4 of 10.0.0.1
    "2001:db8::1",
    "2001::1",  # Teredo
    "100::1",  # discard-only
]
GLOBAL = ["93.184.215.14", "8.8.8.8", "2606:4700::1111", "64:ff9b::808:808", "2002:808:808::1"]


@pytest.mark.parametrize("text", REFUSED)
def test_internal_addresses_and_their_ipv6_spellings_are_not_global(text):
    assert address_kind(ipaddress.ip_address(text)) != ""


@pytest.mark.parametrize("text", GLOBAL)
def test_public_addresses_are_global(text):
    assert address_kind(ipaddress.ip_address(text)) == ""


def _ok(entry: str, url: str, addresses: list[str]) -> bool:
    return listed([parse_entry(entry)], origin(url), [ipaddress.ip_address(a) for a in addresses])


def test_an_entry_without_a_port_means_the_schemes_default_port():
    assert _ok("127.0.0.1", "http://127.0.0.1/v1", ["127.0.0.1"])
    assert _ok("127.0.0.1", "https://127.0.0.1/v1", ["127.0.0.1"])
    for port in (5432, 6379, 8000):
        assert not _ok("127.0.0.1", f"http://127.0.0.1:{port}/v1", ["127.0.0.1"])
    assert not _ok("localhost", "http://localhost:6379/v1", ["127.0.0.1"])


def test_ports_wildcards_networks_schemes_and_ipv6():
    assert _ok("vllm.lab:8000", "http://vllm.lab:8000/v1", ["10.0.0.7"])
    assert not _ok("vllm.lab:8000", "http://vllm.lab:8001/v1", ["10.0.0.7"])
    assert _ok("127.0.0.1:*", "http://127.0.0.1:6379/", ["127.0.0.1"])
    assert _ok("10.0.0.0/8:8000", "http://gpu.lab:8000/v1", ["10.2.3.4"])
    assert not _ok("10.0.0.0/8:8000", "http://gpu.lab:8000/v1", ["10.2.3.4", "11.0.0.1"])
    assert _ok("*.corp.example", "https://a.corp.example/v1", ["10.0.0.1"])
    assert not _ok("*.corp.example", "https://a.corp.example:8443/v1", ["10.0.0.1"])
    assert _ok("[::1]:8000", "http://[::1]:8000/v1", ["::1"])
    assert _ok("[fd00::/8]:8000", "http://x.lab:8000/v1", ["fd00::5"])
    assert _ok("https://api.lab", "https://api.lab/v1", ["10.0.0.1"])
    assert not _ok("https://api.lab", "http://api.lab:443/v1", ["10.0.0.1"])
    with pytest.raises(ValueError):
        parse_entry("host:99999")


def test_a_listed_ipv4_address_covers_its_mapped_form_but_no_other_spelling():
    assert _ok("127.0.0.1:8000", "http://[::ffff:127.0.0.1]:8000/v1", ["::ffff:127.0.0.1"])
    for other in ("::7f00:1", "64:ff9b::7f00:1", "2002:7f00:1::1"):
        assert not _ok("127.0.0.1:8000", f"http://[{other}]:8000/v1", [other])
