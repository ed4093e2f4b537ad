"""A local OpenAI-compatible chat-completions server with scripted answers.

Stdlib only (`http.server` in a thread), so tests, benchmarks and the demo
(`manage.py judge_testserver`) exercise the real client over real HTTP. It answers
`POST /v1/chat/completions` (and `GET /v1/models`) with JSON bodies carrying `usage`.

Answers are deterministic per prompt. The server answers by the method key each request
carries in its `X-Ideareview-Method` header (`judging.methods.prompts.METHOD_HEADER`: the
prompt template's name, which `judging.llm.client` sends outside the cache key) and pulls the
idea texts out of the `<<< … >>>` blocks:

- direct scoring: every metric gets a score from a hash of the idea text and the metric
  key, inside the metric's stated range;
- absolute: a score in the stated range from a hash of the idea text;
- pairwise / Swiss: `[[A]]` or `[[B]]` for the better idea: by default the longer text
  (`pairwise_rule="longer"`), or the higher hash (`"hash"`); equal → `[[TIE]]` (Swiss,
  which forbids ties, then picks A);
- LigBench formalisation: a four-part JSON object cut from the idea text;
- LigBench initial scoring: a reason, then `SCORES: {…}` with a 0–5 score per asked key
  from a hash of the new idea's text;
- LigBench comparison: a reason per dimension, then `VERDICT: {…}` with one verdict per
  asked dimension, by the same rule as pairwise.

Faults, all settable on `Rules`, are applied in this order: a scripted status list for
the first calls (`script=[429, 429, 500]`), `fail_first` × `fail_status`, a seeded
`error_rate` of `error_status`, `latency` (plus `slow_every` calls sleeping
`slow_latency`, to trigger client timeouts), `garbage_when` (a substring of the prompt
that makes the answer unparseable) and `garbage_rate`, `position_bias` (share of
pairwise answers that say A whatever the ideas), `think` (wrap answers in
`<think>…</think>`).

Style normalization (`studies.protocol.normalization`, recognised by its system prompt):
the proposal in the user message comes back re-rendered into the seven-section template
(`normalize_style="template"`, the default), re-rendered and with every section's style
canonicalised as well (`"canonical"`: markup, bullets and numbering dropped, clauses split
at line breaks, sentence ends, semicolons and ", and ", each written as one capitalised
sentence; so two proposals with the same clauses come back identical whoever wrote them,
which is what the style-leakage check needs to see) or unchanged (`"echo"`). Content faults:
`normalize_drop` lists words or numbers deleted from every rewrite that has them (a
rewrite that "forgets" GPT-4 or 42), and `normalize_refuse_when` a substring of the
proposal that gets a refusal instead of a rewrite.

Source guessing (`studies.analysis.leakage`, the style-leakage check): "AI probability: N"
from the proposal's look (`source_guess="style"`): Markdown headings push N up, bullet
lines push it down, so it tells the two synthetic styles of the tests apart until a
rewrite gives both the same headings and no bullets; `"hash"` guesses from a hash.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from judging.llm.wire import METHOD_HEADER
from studies.analysis.leakage import SOURCE_GUESS_PROMPT_VERSION
from studies.protocol.normalization import NORMALIZATION_PROMPT_VERSION

__all__ = ["Rules", "TestServer", "answer_for", "idea_quality", "method_of"]

_BLOCK = re.compile(r"<<<\n(.*?)\n>>>", re.DOTALL)
_PART_BLOCK = re.compile(r"Idea A:\n(.*?)\n\nIdea B:\n(.*?)\n\nFirst reason", re.DOTALL)
_NEW_IDEA = re.compile(r"New idea:\n(.*?)\n\nDimensions:", re.DOTALL)
_RANGE = re.compile(r"^## (\w+)[^\n]*: integer from (-?\d+) to (-?\d+)", re.MULTILINE)
_ABS_RANGE = re.compile(r"whole-number scale from (-?\d+) \(lowest\) to (-?\d+)")
_KEYS = re.compile(r"with exactly the keys ([\w, ]+?), each")


@dataclass
class Rules:
    latency: float = 0.0
    slow_every: int = 0
    slow_latency: float = 0.0
    script: list[int] = field(default_factory=list)
    fail_first: int = 0
    fail_status: int = 429
    error_rate: float = 0.0
    error_status: int = 500
    garbage_when: str = ""
    garbage_rate: float = 0.0
    position_bias: float = 0.0
    pairwise_rule: str = "longer"
    think: bool = False
    seed: int = 0
    normalize_style: str = "template"
    normalize_drop: list[str] = field(default_factory=list)
    normalize_refuse_when: str = ""
    source_guess: str = "style"


def _h(*parts: str) -> int:
    return int.from_bytes(hashlib.sha256("\x1f".join(parts).encode()).digest()[:8], "big")


def idea_quality(text: str, rule: str = "longer") -> float:
    """The hidden "true" quality the scripted judge ranks by."""
    if rule == "hash":
        return _h("quality", text) / 2**64
    return float(len(text))


def _pick(a: str, b: str, rule: str) -> str:
    qa, qb = idea_quality(a, rule), idea_quality(b, rule)
    return "A" if qa > qb else "B" if qb > qa else "tie"


def _formalise(text: str) -> dict[str, Any]:
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n+", text) if s.strip()] or [text]
    pick = lambda i: sentences[min(i, len(sentences) - 1)]  # noqa: E731
    return {
        "main_target": pick(0),
        "core_breakthrough": pick(1),
        "innovative_methods": [pick(2)],
        "experimental_design": pick(3),
    }


_NORMALIZE_MARK = "copy editor for a study in which experts review research proposals"
_GUESS_MARK = "how likely it is that an AI system wrote the"


def _guess_source(proposal: str, rule: str) -> str:
    if rule == "hash":
        return f"AI probability: {_h('source', proposal) % 101}"
    lines = [ln.strip() for ln in proposal.split("\n") if ln.strip()]
    headings = sum(ln.startswith("#") for ln in lines)
    bullets = sum(ln.startswith(("- ", "* ")) for ln in lines)
    lean = (headings - bullets) / (headings + bullets) if headings + bullets else 0.0
    return f"AI probability: {round(50 + 40 * lean)}"


_MARKUP = re.compile(r"^\s*(?:#{1,6}\s*|[-*+\u2022]\s+|\(?\d+[.)]\s+|step\s+\d+\s*[:.]\s*)", re.I)
_CLAUSE_SPLIT = re.compile(r"\n+|(?<=[.!?;])\s+|;\s*|,\s+and\s+")


def _canonical(body: str, *, title: bool = False) -> str:
    """One house style for a section body: plain sentences, one per clause."""
    lines = [_MARKUP.sub("", ln).replace("**", "").replace("__", "") for ln in body.split("\n")]
    clauses = []
    for raw in _CLAUSE_SPLIT.split("\n".join(lines)):
        raw = " ".join(raw.split())
        clause = raw.rstrip(".;:,!? ")
        if clause:
            end = "?" if raw.endswith("?") else "."  # a question stays a question
            clauses.append((clause[:1].upper() + clause[1:], end))
    if title:
        return " ".join(c for c, _ in clauses)
    return " ".join(c + end for c, end in clauses)


def _normalize(proposal: str, rules: Rules) -> str:
    if rules.normalize_refuse_when and rules.normalize_refuse_when in proposal:
        return "I'm sorry, but I can't help with rewriting this proposal."
    text = proposal
    if rules.normalize_style == "template":
        # Pure Python (no Django): the same parser the app uses, so sections survive.
        from studies.protocol.template import parse_sections, render_sections

        parsed = parse_sections(proposal)
        if parsed.sections:
            text = render_sections(parsed.sections)
    elif rules.normalize_style == "canonical":
        from studies.protocol.template import parse_sections, render_sections

        parsed = parse_sections(proposal)
        if parsed.sections:
            text = render_sections(
                {k: _canonical(v, title=k == "title") for k, v in parsed.sections.items()}
            )
    for word in rules.normalize_drop:
        text = re.sub(rf"(?<![\w.-]){re.escape(word)}(?![\w-]|\.\d)\s?", "", text)
    return text


def _scores(user: str, blocks: list[str]) -> str:
    idea = blocks[0] if blocks else user
    return json.dumps(
        {
            key: {
                "score": int(lo) + _h(idea, key) % (int(hi) - int(lo) + 1),
                "rationale": f"Scripted rationale for {key}.",
            }
            for key, lo, hi in _RANGE.findall(user)
        }
    )


def _absolute(user: str, blocks: list[str]) -> str:
    m = _ABS_RANGE.search(user)
    if not (m and blocks):
        return _CONFUSED
    lo, hi = int(m.group(1)), int(m.group(2))
    score = lo + _h(blocks[0], "absolute") % (hi - lo + 1)
    return json.dumps({"score": score, "rationale": "Scripted."})


def _dimension_verdicts(user: str, rules: Rules, rng: random.Random) -> str:
    m, keys = _PART_BLOCK.search(user), _KEYS.search(user)
    if not (m and keys):
        return _CONFUSED
    dims = [k.strip() for k in keys.group(1).split(",")]
    verdict = _pick(m.group(1), m.group(2), rules.pairwise_rule)
    if rules.position_bias and rng.random() < rules.position_bias:
        verdict = "A"
    reasons = "\n".join(f"{d}: the scripted judge prefers {verdict}." for d in dims)
    return f"{reasons}\nVERDICT: {json.dumps({d: verdict for d in dims})}"


def _initial_scores(user: str) -> str:
    m, keys = _NEW_IDEA.search(user), _KEYS.search(user)
    if not (m and keys):
        return _CONFUSED
    dims = [k.strip() for k in keys.group(1).split(",")]
    scores = {d: round(_h(m.group(1), d) % 51 / 10, 1) for d in dims}
    return f"Scripted comparison with the examples.\nSCORES: {json.dumps(scores)}"


def _pair_verdict(user: str, blocks: list[str], rules: Rules, rng: random.Random) -> str:
    if len(blocks) != 2:
        return _CONFUSED
    if rules.position_bias and rng.random() < rules.position_bias:
        return "[[A]]"
    verdict = _pick(blocks[0], blocks[1], rules.pairwise_rule)
    if verdict == "tie" and "[[TIE]]" not in user:
        verdict = "A"
    return f"[[{verdict.upper()}]]"


_CONFUSED = "I am not sure what you are asking."
NORMALIZE = NORMALIZATION_PROMPT_VERSION  # studies' prompts have no "@version" part
SOURCE_GUESS = SOURCE_GUESS_PROMPT_VERSION


def method_of(messages: list[dict[str, Any]]) -> str:
    """The method key of a request that carries none (a direct caller of `answer_for`, or
    a client other than ours): the two studies prompts by their system prompt, two idea
    blocks as a pairwise question. Requests from `judging.llm.client` carry the key."""
    system = " ".join(str(m.get("content", "")) for m in messages if m.get("role") == "system")
    if _NORMALIZE_MARK in system:
        return NORMALIZE
    if _GUESS_MARK in system:
        return SOURCE_GUESS
    user = next((m["content"] for m in reversed(messages) if m.get("role") == "user"), "")
    return "pairwise" if len(_BLOCK.findall(str(user))) == 2 else ""


def answer_for(
    messages: list[dict[str, Any]], rules: Rules, rng: random.Random, method: str = ""
) -> str:
    """The scripted answer to a chat request (without faults), chosen by its method key
    (the `METHOD_HEADER` of the request; guessed by `method_of` when there is none)."""
    user = str(next((m["content"] for m in reversed(messages) if m.get("role") == "user"), ""))
    method = method or method_of(messages)
    blocks = _BLOCK.findall(user)
    if method == NORMALIZE:
        return _normalize(user, rules)
    if method == SOURCE_GUESS:
        return _guess_source(blocks[0] if blocks else user, rules.source_guess)
    if method == "ligbench_formalisation" and blocks:
        return json.dumps(_formalise(blocks[0]))
    if method == "ligbench_comparison":
        return _dimension_verdicts(user, rules, rng)
    if method == "ligbench_initial":
        return _initial_scores(user)
    if method == "direct_scoring":
        return _scores(user, blocks)
    if method == "absolute":
        return _absolute(user, blocks)
    if method in ("pairwise", "swiss"):
        return _pair_verdict(user, blocks, rules, rng)
    return _CONFUSED


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    # One write per response and no Nagle: otherwise delayed ACKs add ~40 ms per call.
    disable_nagle_algorithm = True
    wbufsize = 1 << 16

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
        pass

    def _send(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        if self.path.rstrip("/").endswith("/models"):
            self._send(200, {"object": "list", "data": [{"id": "scripted", "object": "model"}]})
        else:
            self._send(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(404, {"error": {"message": "not found"}})
            return
        try:
            body = json.loads(raw)
            messages = body["messages"]
        except (ValueError, KeyError, TypeError):
            self._send(400, {"error": {"message": "bad request body"}})
            return
        owner = self.server.owner
        status, text, delay = owner._decide(messages, self.headers.get(METHOD_HEADER) or "")
        with owner._lock:
            owner.in_flight += 1
            owner.max_in_flight = max(owner.max_in_flight, owner.in_flight)
        try:
            if delay:
                time.sleep(delay)
        finally:
            with owner._lock:
                owner.in_flight -= 1
        if status != 200:
            self._send(
                status,
                {"error": {"message": f"scripted {status}", "type": "scripted"}},
                {"Retry-After": "0"} if status == 429 else None,
            )
            return
        prompt_chars = sum(len(str(m.get("content", ""))) for m in messages)
        self._send(
            200,
            {
                "id": f"chatcmpl-{self.server.owner.requests}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", "scripted"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt_chars // 4 + 1,
                    "completion_tokens": len(text) // 4 + 1,
                    "total_tokens": prompt_chars // 4 + len(text) // 4 + 2,
                },
            },
        )


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128
    owner: TestServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that timed out closes the socket before a slow answer is written.
        pass


class TestServer:
    """`with TestServer(Rules(...)) as server:` → `server.base_url` is ready to use."""

    __test__ = False  # not a pytest test class

    def __init__(self, rules: Rules | None = None, host: str = "127.0.0.1", port: int = 0):
        self.rules = rules or Rules()
        self.host, self.port = host, port
        self._lock = threading.Lock()
        self.requests = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.statuses: Counter[int] = Counter()
        self.prompts: Counter[str] = Counter()
        self._rng = random.Random(self.rules.seed)
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> TestServer:
        self._httpd = _Server((self.host, self.port), _Handler)
        self._httpd.owner = self
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> TestServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def reset_counts(self) -> None:
        with self._lock:
            self.requests = 0
            self.max_in_flight = 0
            self.statuses.clear()
            self.prompts.clear()

    @property
    def answered(self) -> int:
        """Requests that got a 200."""
        return self.statuses[200]

    def _decide(self, messages: list[dict[str, Any]], method: str) -> tuple[int, str, float]:
        r = self.rules
        with self._lock:
            self.requests += 1
            n = self.requests
            key = json.dumps(messages, sort_keys=True)
            self.prompts[hashlib.sha256(key.encode()).hexdigest()] += 1
            if n <= len(r.script):
                status = r.script[n - 1]
            elif n <= r.fail_first:
                status = r.fail_status
            elif r.error_rate and self._rng.random() < r.error_rate:
                status = r.error_status
            else:
                status = 200
            delay = r.latency
            if r.slow_every and n % r.slow_every == 0:
                delay = r.slow_latency
            garbage = bool(r.garbage_rate and self._rng.random() < r.garbage_rate)
            text = "" if status != 200 else answer_for(messages, r, self._rng, method)
            self.statuses[status] += 1
        if status == 200:
            if garbage or (r.garbage_when and r.garbage_when in key):
                text = "Both ideas have merit; I cannot choose between them."
            if r.think:
                text = f"<think>Weighing the two carefully.</think>\n{text}"
        return status, text, delay
