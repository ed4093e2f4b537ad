"""An owner's judge config cannot turn the server against itself: key variables come from
the administrator's allow-list, endpoints must be public unless listed, the connection
goes to the checked address only, and no redirect is followed.

Every test here makes sockets fail: `socket.create_connection` raises (recording where it
was asked to connect) and `getaddrinfo` answers from a table, so no test ever connects to
an internal address."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from django.urls import reverse

from judging.methods.prompts import pairwise_messages
from llm import endpoints
from llm.client import complete, prepare
from llm.endpoints import EndpointRefused, endpoint_check
from llm.models import JudgeConfig

MESSAGES = pairwise_messages("A short idea.", "A longer idea than the other one.")
PUBLIC = "93.184.215.14"
REAL_GETADDRINFO = socket.getaddrinfo


class Net:
    """A resolver table and a record of every connection attempt (all refused)."""

    def __init__(self, monkeypatch):
        self.names: dict[str, list[str]] = {}
        self.connects: list[tuple[str, int]] = []
        self.lookups: list[str] = []
        monkeypatch.setattr(socket, "getaddrinfo", self.getaddrinfo)
        monkeypatch.setattr(socket, "create_connection", self.create_connection)

    def getaddrinfo(self, host, port, *args, **kwargs):
        self.lookups.append(host)
        if host in self.names:
            answers = self.names[host]
            if len(answers) > 1 and host.startswith("rebind."):
                # a rebinding DNS server: public first, internal from then on
                self.names[host] = answers[1:]
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (answers[0], port))]
        try:  # numeric forms only: the C library parses them without any lookup
            return REAL_GETADDRINFO(host, port, *args, flags=socket.AI_NUMERICHOST, **kwargs)
        except socket.gaierror as exc:
            raise socket.gaierror(socket.EAI_NONAME, f"{host}: not in the test's table") from exc

    def create_connection(self, address, *args, **kwargs):
        self.connects.append(address)
        raise ConnectionRefusedError(f"test: no connection to {address}")


@pytest.fixture
def net(monkeypatch, settings):
    settings.DEBUG = False
    settings.LLM_HOST_ALLOWLIST = []
    settings.LLM_ONLY_LISTED_HOSTS = False
    settings.OPENAI_BASE_URL = ""
    endpoints.endpoint_checks_forget()
    yield Net(monkeypatch)
    endpoints.endpoint_checks_forget()


INTERNAL = [
    "http://127.0.0.1:8000/v1",
    "http://localhost/v1",
    "http://[::1]/v1",
    "http://[::ffff:127.0.0.1]/v1",
    "http://[::ffff:7f00:1]/v1",
    "http://2130706433/v1",  # decimal 127.0.0.1
    "http://0x7f000001/v1",  # hex
    "http://0177.0.0.1/v1",  # octal
    "http://127.1/v1",  # short form
    "http://0.0.0.0/v1",
    "http://10.0.0.5/v1",
    "http://172.16.3.4/v1",
    "http://192.168.1.20/v1",
    "http://100.64.0.1/v1",  # shared address space
    "http://169.254.169.254/latest/meta-data",  # cloud metadata
    "http://[::ffff:169.254.169.254]/v1",
    "http://[fe80::1]/v1",
    "http://[fd00::1]/v1",
    "http://[64:ff9b::a9fe:a9fe]/v1",  # NAT64 form of 169.254.169.254
    "http://[2002:a9fe:a9fe::1]/v1",  # 6to4 form of 169.254.169.254
    "http://metadata.internal/v1",
    "http://redis.internal:6379/0",
]


@pytest.mark.parametrize("url", INTERNAL)
def test_each_internal_address_form_is_refused_without_connecting(net, url):
    net.names["localhost"] = ["127.0.0.1"]
    net.names["metadata.internal"] = ["169.254.169.254"]
    net.names["redis.internal"] = ["10.1.2.3"]
    with pytest.raises(EndpointRefused) as exc:
        endpoint_check(url)
    assert "allow-list" in str(exc.value)
    assert net.connects == []


def test_a_public_host_is_allowed_and_pinned_to_the_address_it_resolved_to(net):
    net.names["api.example.org"] = [PUBLIC]
    checked = endpoint_check("https://api.example.org/v1")
    assert checked.addresses == (PUBLIC,)


def test_the_connection_goes_to_the_checked_address_not_a_rebound_one(net, db):
    # the name answers public once, then 127.0.0.1: the call must still go to the first
    net.names["rebind.example.org"] = [PUBLIC, "127.0.0.1"]
    config = JudgeConfig.objects.create(
        name="rebind", base_url="http://rebind.example.org/v1", model="m", max_attempts=1
    )
    call = complete(config, MESSAGES)
    assert "connection error" in call.error
    assert net.connects and {host for host, _ in net.connects} == {PUBLIC}
    assert net.lookups.count("rebind.example.org") == 1
    # a second call within the check's lifetime reuses the checked address, unasked
    complete(config, pairwise_messages("Another idea.", "And one more idea here."))
    assert {host for host, _ in net.connects} == {PUBLIC}
    assert net.lookups.count("rebind.example.org") == 1


def test_listed_hosts_and_networks_may_be_internal(net, settings):
    net.names["vllm.lab"] = ["10.0.0.7"]
    settings.LLM_HOST_ALLOWLIST = ["vllm.lab:8000", "192.168.0.0/16", "*.corp.example"]
    net.names["gpu.corp.example"] = ["10.9.9.9"]
    assert endpoint_check("http://vllm.lab:8000/v1").addresses == ("10.0.0.7",)
    assert endpoint_check("http://192.168.3.3/v1").addresses == ("192.168.3.3",)
    assert endpoint_check("http://gpu.corp.example/v1").addresses == ("10.9.9.9",)
    with pytest.raises(EndpointRefused):
        endpoint_check("http://10.0.0.8/v1")
    settings.LLM_ONLY_LISTED_HOSTS = True
    net.names["api.example.org"] = [PUBLIC]
    with pytest.raises(EndpointRefused):
        endpoint_check("https://api.example.org/v1")


def test_with_debug_on_loopback_is_allowed_but_private_and_metadata_are_not(net, settings):
    settings.DEBUG = True
    net.names["localhost"] = ["127.0.0.1"]
    assert endpoint_check("http://localhost:11434/v1").addresses == ("127.0.0.1",)
    assert endpoint_check("http://[::1]:8000/v1").addresses == ("::1",)
    for url in ("http://10.0.0.5/v1", "http://169.254.169.254/v1"):
        with pytest.raises(EndpointRefused):
            endpoint_check(url)


def test_listing_names_the_port_too(net, settings):
    # listing 127.0.0.1 means its scheme's default port: not the database, the broker or
    # the app's own admin on other ports
    settings.LLM_HOST_ALLOWLIST = ["127.0.0.1", "vllm.lab:8000"]
    net.names["vllm.lab"] = ["10.0.0.7"]
    assert endpoint_check("http://127.0.0.1/v1").addresses == ("127.0.0.1",)
    assert endpoint_check("http://vllm.lab:8000/v1").addresses == ("10.0.0.7",)
    for url in (
        "http://127.0.0.1:5432/v1",
        "http://127.0.0.1:6379/0",
        "http://127.0.0.1:8000/admin/",
        "http://vllm.lab/v1",
        "http://vllm.lab:8001/v1",
    ):
        with pytest.raises(EndpointRefused):
            endpoint_check(url)
    assert net.connects == []


@pytest.mark.parametrize(
    "url,answer",
    [
        ("http://[::7f00:1]/v1", None),
        ("http://[::a9fe:a9fe]/v1", None),
        ("http://[fec0::1]/v1", None),
        ("http://[64:ff9b::7f00:1]/v1", None),
        ("http://[2002:7f00:1::1]/v1", None),
        ("http://sneaky.example/v1", "::a9fe:a9fe"),
        ("http://sneaky.example/v1", "::ffff:10.0.0.1"),
        ("http://sneaky.example/v1", "fec0::1"),
    ],
)
def test_internal_ipv6_spellings_that_python_calls_global_are_refused(net, url, answer):
    if answer:
        net.names["sneaky.example"] = [answer]
    with pytest.raises(EndpointRefused):
        endpoint_check(url)
    assert net.connects == []


def test_a_key_variable_named_on_a_config_is_never_read_or_sent(net, db, monkeypatch):
    monkeypatch.setenv("DJANGO_SECRET_KEY", "the-server-secret")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-admin-secret")
    net.names["attacker.example"] = [PUBLIC]
    for name in ("DJANGO_SECRET_KEY", "OPENAI_API_KEY"):
        config = JudgeConfig.objects.create(
            name=name, base_url="http://attacker.example/v1", model="m", api_key_env=name
        )
        assert prepare(config, MESSAGES).api_key == "not-needed"


def test_an_owner_cannot_save_an_internal_endpoint(net, client, owner, settings):
    from studies.services.study import study_create

    study = study_create(owner=owner, slug="ssrf")
    client.force_login(owner)
    url = reverse("judging:config_create", args=[study.slug])
    form = {
        "name": "evil",
        "base_url": "http://169.254.169.254/v1",
        "model": "m",
        "api_key_env": "DJANGO_SECRET_KEY",
        "parameters": "{}",
        "price_input_per_million": "0",
        "price_output_per_million": "0",
        "concurrency": "1",
        "timeout_seconds": "5",
        "max_attempts": "1",
        "backoff_seconds": "0",
    }
    body = client.post(url, form).content.decode()
    assert "cannot be used" in body and "link-local" in body
    assert not JudgeConfig.objects.filter(name="evil").exists()
    assert net.connects == []


class _Redirect(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (the handler API)
        self.send_response(307)
        self.send_header("Location", "http://169.254.169.254/latest/meta-data/")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def test_a_redirect_to_an_internal_address_is_not_followed(db, settings, monkeypatch):
    settings.DEBUG = True  # loopback allowed, for the redirecting server
    settings.OPENAI_BASE_URL = ""
    server = HTTPServer(("127.0.0.1", 0), _Redirect)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    attempts: list = []
    real = socket.create_connection

    def guarded(address, *args, **kwargs):
        attempts.append(address[0])
        if address[0] != "127.0.0.1":
            raise AssertionError(f"connected to {address}")
        return real(address, *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", guarded)
    try:
        config = JudgeConfig.objects.create(
            name="redirect",
            base_url=f"http://127.0.0.1:{server.server_port}/v1",
            model="m",
            max_attempts=1,
        )
        call = complete(config, MESSAGES)
    finally:
        server.shutdown()
    assert call.error and "307" in call.error
    assert set(attempts) == {"127.0.0.1"}


def test_resolution_failures_say_so(net):
    with pytest.raises(EndpointRefused) as exc:
        endpoint_check("http://no-such-host.example/v1")
    assert "does not resolve" in str(exc.value)
