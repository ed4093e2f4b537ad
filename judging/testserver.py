"""A local OpenAI-compatible chat-completions server with scripted answers.

Stdlib only (`http.server` in a thread), so tests, benchmarks and the demo
(`manage.py judge_testserver`) exercise the real client over real HTTP. It answers
`POST /v1/chat/completions` (and `GET /v1/models`) with JSON bodies carrying `usage`.

Answers are deterministic per prompt. The server answers by the method key each request
carries in its `X-Ideareview-Method` header (`judging.methods.prompts.METHOD_HEADER`: the
prompt template's name, which `llm.client` sends outside the cache key) and pulls the
idea texts out of the `<<< … >>>` blocks:

- direct scoring: every metric gets a score from a hash of the idea text and the metric
  key, inside the metric's stated range;
- absolute: a score in the stated range from a hash of the idea text;
- pairwise / Swiss (active Bradley–Terry runs ask the pairwise prompt): `[[A]]` or
  `[[B]]` for the better idea: by default the longer text
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

Behaviour profiles (`profile`, a name in `judging.methods.judge_profiles.PROFILES`):
pairwise, Swiss, direct and absolute prompts are then answered as that module's simulated
judge answers them, so a run against the server carries injected effects of known size
(the reliability panel's recovery tests over HTTP). An idea's quality is fixed by its
text (`traits_from_text`); a pairwise verdict adds the profile's position, length and
self-preference terms on the log-odds; a direct or absolute score is the profile's
1–10 score cut to the prompt's range. Self-preference works over HTTP through the
request's `model` and a marker in the idea text: an idea whose text contains
`own_marker` formatted with the judge's family (`model_family` of the request's model:
"[style:openai]" for gpt-4o under the default marker) counts as written by the judge's
own family, as a judge recognises its family's style. Repetition: the server counts each
exact prompt, and the k-th repeat (k ≥ 1) answers afresh with probability
`repetition_noise` (pairwise) or draws fresh call noise of sd `repeat_sd` (scores); the
first answer and every random number come from hashes of the prompt
(`judge_profiles.uniform`), so the same requests get the same answers from any server.
`position_bias` still applies on top. LigBench's prompts ignore the profile.

Provider behaviours. Reasoning models: a request for a model matching
`reasoning_models` (a regular expression; empty: none) that carries `temperature`,
`top_p`, a penalty or `max_tokens` is refused with 400, as real providers refuse it; an
answer from one reports `reasoning_tokens` in `usage.completion_tokens_details`
(counted in `completion_tokens`, as OpenAI counts them). Structured outputs: a request
with `response_format` of type json_schema is answered with JSON that conforms to the
schema (`json_schema="follow"`: the scripted answer reshaped, garbage and `<think>`
faults left out, as a constrained decoder would; the schema must be a strict one, or 400)
or refused with 400 (`"refuse"`, an endpoint without the feature). Every answer names
the model (`served_model`, a format of the requested `{model}`) and carries
`system_fingerprint` (omitted when empty). The Batch API: `POST /v1/files` (purpose
"batch"), `POST /v1/batches`, `GET /v1/batches/{id}` (in progress for `batch_polls`
polls, then every line is answered as a single call would be, the method key read from
the front of the line's `custom_id`, and the batch completes), `POST
/v1/batches/{id}/cancel` and `GET /v1/files/{id}/content`.

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

from judging.methods import judge_profiles as jp
from judging.methods.reliability import model_family
from llm.wire import METHOD_HEADER
from studies.analysis.leakage import SOURCE_GUESS_PROMPT_VERSION
from studies.protocol.normalization import NORMALIZATION_PROMPT_VERSION

__all__ = ["Asked", "Rules", "TestServer", "answer_for", "conforms", "idea_quality", "method_of"]

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
    profile: str = ""
    """A name in `judge_profiles.PROFILES`: pairwise, Swiss and scores answered as that
    simulated judge ("": the rules above)."""
    own_marker: str = "[style:{family}]"
    """Text marking an idea as the judge's own family's; `{family}` is the family of the
    request's model."""
    reasoning_models: str = ""
    """Models (a regular expression) treated as reasoning models."""
    reasoning_tokens: int = 48
    """Tokens a reasoning model's answer reports as spent reasoning."""
    json_schema: str = "follow"
    """"follow": answer json_schema requests with conforming JSON; "refuse": 400."""
    served_model: str = "{model}"
    """The model name answers carry; `{model}` is the requested one."""
    system_fingerprint: str = "fp_scripted"
    batch_polls: int = 1
    """How many times a batch is reported in progress before it completes."""

    def __post_init__(self) -> None:
        if self.profile and self.profile not in jp.PROFILES:
            raise ValueError(
                f"unknown profile {self.profile!r}; known: {', '.join(sorted(jp.PROFILES))}"
            )


@dataclass(frozen=True)
class Asked:
    """What the server knows about a request beyond its messages."""

    method: str = ""
    model: str = ""
    repeat: int = 0
    """How many times this exact prompt was asked before."""


_REASONING_REFUSES = ("temperature", "top_p", "presence_penalty", "frequency_penalty")


def _strict_problem(schema: Any, where: str = "schema") -> str:
    """Why a strict-mode schema is not one ('' if it is): every object names all its
    properties as required and allows no others."""
    if not isinstance(schema, dict):
        return f"{where} is not an object"
    if schema.get("type") == "object":
        props = schema.get("properties")
        if not isinstance(props, dict):
            return f"{where} has no properties"
        if schema.get("additionalProperties") is not False:
            return f"{where}: additionalProperties must be false"
        if sorted(schema.get("required") or []) != sorted(props):
            return f"{where}: every property must be required"
        for key, sub in props.items():
            problem = _strict_problem(sub, f"{where}.{key}")
            if problem:
                return problem
    if schema.get("type") == "array":
        return _strict_problem(schema.get("items"), f"{where}[]")
    return ""


def conforms(value: Any, schema: dict[str, Any]) -> bool:
    """Whether `value` fits `schema` (the subset of JSON Schema strict mode uses)."""
    kind = schema.get("type")
    if "enum" in schema and value not in schema["enum"]:
        return False
    if kind == "object":
        props = schema.get("properties", {})
        return (
            isinstance(value, dict)
            and set(value) == set(props)
            and all(conforms(value[k], props[k]) for k in props)
        )
    if kind == "array":
        return isinstance(value, list) and all(conforms(v, schema["items"]) for v in value)
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return (
            isinstance(value, int)
            and not isinstance(value, bool)
            and schema.get("minimum", value) <= value <= schema.get("maximum", value)
        )
    return kind is None


def _conforming(text: str, schema: dict[str, Any]) -> str | None:
    """The scripted answer as JSON under `schema` (None when it cannot be reshaped)."""
    try:
        value: Any = json.loads(text)
    except ValueError:
        value = None
    if not conforms(value, schema) and "winner" in schema.get("properties", {}):
        tag = re.search(r"\[\[\s*(A|B|TIE)\s*\]\]", text, re.IGNORECASE)
        if tag:
            word = tag.group(1).upper()
            value = {"winner": "tie" if word == "TIE" else word, "rationale": "Scripted."}
    return json.dumps(value) if conforms(value, schema) else None


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


def _traits(text: str, rules: Rules, asked: Asked) -> jp.IdeaTraits:
    marker = rules.own_marker.format(family=model_family(asked.model)) if asked.model else ""
    return jp.traits_from_text(text, own_family=bool(marker) and marker in text)


def _profile_score(
    user: str, idea: str, key: str, lo: int, hi: int, rules: Rules, asked: Asked
) -> int:
    """The profile's score of `idea` on `key`: idea noise fixed by the idea and key, call
    noise by the prompt and its repeat number, cut to [lo, hi]."""
    profile = jp.PROFILES[rules.profile]
    score = jp.direct_score(
        profile,
        _traits(idea, rules, asked),
        jp.normal("idea", idea, key),
        jp.normal("call", user, key, asked.repeat),
    )
    return min(max(score, lo), hi)


def _score(user: str, idea: str, key: str, lo: int, hi: int, rules: Rules, asked: Asked) -> int:
    if rules.profile:
        return _profile_score(user, idea, key, lo, hi, rules, asked)
    return lo + _h(idea, key) % (hi - lo + 1)


def _scores(user: str, blocks: list[str], rules: Rules, asked: Asked) -> str:
    idea = blocks[0] if blocks else user
    return json.dumps(
        {
            key: {
                "score": _score(user, idea, key, int(lo), int(hi), rules, asked),
                "rationale": f"Scripted rationale for {key}.",
            }
            for key, lo, hi in _RANGE.findall(user)
        }
    )


def _absolute(user: str, blocks: list[str], rules: Rules, asked: Asked) -> str:
    m = _ABS_RANGE.search(user)
    if not (m and blocks):
        return _CONFUSED
    lo, hi = int(m.group(1)), int(m.group(2))
    score = _score(user, blocks[0], "absolute", lo, hi, rules, asked)
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


def _profile_pick(user: str, blocks: list[str], rules: Rules, asked: Asked) -> str:
    """ "A" or "B" as the profile's judge answers this prompt on its `repeat`-th asking."""
    a, b = (_traits(text, rules, asked) for text in blocks)
    again = None
    if asked.repeat:
        again = (jp.uniform(user, "again", asked.repeat), jp.uniform(user, "fresh", asked.repeat))
    return jp.pairwise_answer(jp.PROFILES[rules.profile], a, b, jp.uniform(user, "first"), again)


def _pair_verdict(
    user: str, blocks: list[str], rules: Rules, rng: random.Random, asked: Asked
) -> str:
    if len(blocks) != 2:
        return _CONFUSED
    if rules.position_bias and rng.random() < rules.position_bias:
        return "[[A]]"
    if rules.profile:
        return f"[[{_profile_pick(user, blocks, rules, asked)}]]"
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
    blocks as a pairwise question. Requests from `llm.client` carry the key."""
    system = " ".join(str(m.get("content", "")) for m in messages if m.get("role") == "system")
    if _NORMALIZE_MARK in system:
        return NORMALIZE
    if _GUESS_MARK in system:
        return SOURCE_GUESS
    user = next((m["content"] for m in reversed(messages) if m.get("role") == "user"), "")
    return "pairwise" if len(_BLOCK.findall(str(user))) == 2 else ""


def answer_for(
    messages: list[dict[str, Any]],
    rules: Rules,
    rng: random.Random,
    method: str = "",
    asked: Asked | None = None,
) -> str:
    """The scripted answer to a chat request (without faults), chosen by its method key
    (the `METHOD_HEADER` of the request, or `asked.method`; guessed by `method_of` when
    there is none). `asked` carries the request's model and repeat number, which only the
    behaviour profiles read."""
    user = str(next((m["content"] for m in reversed(messages) if m.get("role") == "user"), ""))
    asked = asked or Asked()
    method = method or asked.method or method_of(messages)
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
        return _scores(user, blocks, rules, asked)
    if method == "absolute":
        return _absolute(user, blocks, rules, asked)
    if method in ("pairwise", "swiss"):
        return _pair_verdict(user, blocks, rules, rng, asked)
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
        path = self.path.rstrip("/")
        owner = self.server.owner
        if path.endswith("/models"):
            self._send(200, {"object": "list", "data": [{"id": "scripted", "object": "model"}]})
        elif path.endswith("/content") and "/files/" in path:
            data = owner.files.get(path.split("/")[-2])
            if data is None:
                self._send(404, {"error": {"message": "no such file"}})
            else:
                self._send_bytes(200, data, "application/octet-stream")
        elif "/batches/" in path:
            self._send(*owner._batch_get(path.split("/")[-1]))
        else:
            self._send(404, {"error": {"message": "not found"}})

    def _send_bytes(self, status: int, data: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        path = self.path.rstrip("/")
        owner = self.server.owner
        if path.endswith("/files"):
            status, payload = owner._file_upload(self.headers.get("Content-Type") or "", raw)
            self._send(status, payload)
            return
        if path.endswith("/batches") or path.endswith("/cancel"):
            try:
                body = json.loads(raw) if raw else {}
            except ValueError:
                body = None
            self._send(*owner._batch_post(path, body))
            return
        if not path.endswith("/chat/completions"):
            self._send(404, {"error": {"message": "not found"}})
            return
        try:
            body = json.loads(raw)
            body["messages"][0]  # noqa: B018 - a list of messages or a 400
        except (ValueError, KeyError, TypeError, IndexError):
            self._send(400, {"error": {"message": "bad request body"}})
            return
        status, payload, headers, delay = owner.chat(body, self.headers.get(METHOD_HEADER) or "")
        with owner._lock:
            owner.in_flight += 1
            owner.max_in_flight = max(owner.max_in_flight, owner.in_flight)
        try:
            if delay:
                time.sleep(delay)
        finally:
            with owner._lock:
                owner.in_flight -= 1
        self._send(status, payload, headers)


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
        self.schemas: Counter[str] = Counter()
        """json_schema requests by schema name, refused ones included."""
        self.refusals: list[str] = []
        """The messages of requests refused with 400 as a provider would."""
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        """Batches created, by id: the batch object as the API shows it, plus its polls."""
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
            self.schemas.clear()
            self.refusals.clear()

    @property
    def answered(self) -> int:
        """Requests that got a 200."""
        return self.statuses[200]

    def chat(
        self, body: dict[str, Any], method: str
    ) -> tuple[int, dict[str, Any], dict[str, str] | None, float]:
        """Status, body, headers and delay of the answer to one chat request."""
        messages, model = body["messages"], str(body.get("model") or "")
        schema = self._schema(body)
        refusal = self._refusal(body, model)
        if refusal:
            return 400, {"error": {"message": refusal, "type": "invalid_request_error"}}, None, 0.0
        status, text, delay = self._decide(messages, method, model, structured=schema is not None)
        if status == 200 and schema is not None:
            shaped = _conforming(text, schema)
            if shaped is None:
                status = 500
                with self._lock:
                    self.statuses[200] -= 1
                    self.statuses[500] += 1
            text = shaped or ""
        if status != 200:
            error = {"error": {"message": f"scripted {status}", "type": "scripted"}}
            return status, error, {"Retry-After": "0"} if status == 429 else None, delay
        return 200, self._completion(messages, model, text), None, delay

    # --- the Batch API: files.create, batches.create / retrieve / cancel, files.content

    def _file_upload(self, content_type: str, raw: bytes) -> tuple[int, dict[str, Any]]:
        from email.parser import BytesParser
        from email.policy import default

        head = f"Content-Type: {content_type}\r\n\r\n".encode()
        message = BytesParser(policy=default).parsebytes(head + raw)
        parts: dict[str, bytes] = {}
        if message.is_multipart():
            for part in message.iter_parts():
                name = part.get_param("name", header="content-disposition")
                payload = part.get_payload(decode=True)
                parts[str(name)] = payload if isinstance(payload, bytes) else b""
        if "file" not in parts or parts.get("purpose") != b"batch":
            return 400, {"error": {"message": "expected a file with purpose 'batch'"}}
        with self._lock:
            file_id = f"file-{len(self.files) + 1}"
            self.files[file_id] = parts["file"]
        return 200, {
            "id": file_id,
            "object": "file",
            "bytes": len(parts["file"]),
            "created_at": int(time.time()),
            "filename": "requests.jsonl",
            "purpose": "batch",
            "status": "processed",
        }

    def _batch_post(self, path: str, body: Any) -> tuple[int, dict[str, Any]]:
        if path.endswith("/cancel"):
            batch = self.batches.get(path.split("/")[-2])
            if batch is None:
                return 404, {"error": {"message": "no such batch"}}
            if batch["status"] not in ("completed", "failed", "expired"):
                batch["status"] = "cancelled"
            return 200, self._batch_view(batch)
        if not isinstance(body, dict) or body.get("input_file_id") not in self.files:
            return 400, {"error": {"message": "input_file_id names no uploaded file"}}
        if body.get("endpoint") != "/v1/chat/completions":
            return 400, {"error": {"message": "only /v1/chat/completions is batched here"}}
        with self._lock:
            batch_id = f"batch_{len(self.batches) + 1}"
            self.batches[batch_id] = {
                "id": batch_id,
                "object": "batch",
                "endpoint": body["endpoint"],
                "input_file_id": body["input_file_id"],
                "completion_window": body.get("completion_window", "24h"),
                "status": "validating",
                "created_at": int(time.time()),
                "polls": 0,
            }
        return 200, self._batch_view(self.batches[batch_id])

    def _batch_get(self, batch_id: str) -> tuple[int, dict[str, Any]]:
        batch = self.batches.get(batch_id)
        if batch is None:
            return 404, {"error": {"message": "no such batch"}}
        batch["polls"] += 1
        if batch["status"] in ("validating", "in_progress"):
            if batch["polls"] <= self.rules.batch_polls:
                batch["status"] = "in_progress"
            else:
                self._batch_complete(batch)
        return 200, self._batch_view(batch)

    def _batch_complete(self, batch: dict[str, Any]) -> None:
        """Answer every line of the batch's input file, as single calls are answered."""
        lines, counts = [], Counter[str]()
        for n, line in enumerate(self.files[batch["input_file_id"]].decode().splitlines()):
            if not line.strip():
                continue
            request = json.loads(line)
            custom_id = str(request.get("custom_id"))
            method = custom_id.rpartition(".")[0]
            status, payload, _, _ = self.chat(request["body"], method)
            counts["completed" if status == 200 else "failed"] += 1
            response = {"status_code": status, "request_id": f"req_{n}", "body": payload}
            lines.append(
                json.dumps(
                    {
                        "id": f"batch_req_{n}",
                        "custom_id": custom_id,
                        "response": response,
                        "error": None,
                    }
                )
            )
        with self._lock:
            file_id = f"file-{len(self.files) + 1}"
            self.files[file_id] = ("\n".join(lines) + "\n").encode()
        batch.update(
            status="completed",
            output_file_id=file_id,
            request_counts={
                "total": len(lines),
                "completed": counts["completed"],
                "failed": counts["failed"],
            },
        )

    @staticmethod
    def _batch_view(batch: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in batch.items() if k != "polls"}

    def _is_reasoning(self, model: str) -> bool:
        rule = self.rules.reasoning_models
        return bool(rule) and re.search(rule, model) is not None

    def _refusal(self, body: dict[str, Any], model: str) -> str:
        """Why a provider would refuse this request with 400 ('' if it would not); a
        refused request is counted."""
        problem = ""
        if self._is_reasoning(model):
            refused = [k for k in (*_REASONING_REFUSES, "max_tokens") if k in body]
            if refused:
                problem = (
                    f"Unsupported parameter: {refused[0]!r} is not supported with this "
                    "model"
                    + (
                        ". Use 'max_completion_tokens' instead."
                        if refused[0] == "max_tokens"
                        else "."
                    )
                )
        fmt = body.get("response_format")
        if not problem and isinstance(fmt, dict) and fmt.get("type") == "json_schema":
            if self.rules.json_schema == "refuse":
                problem = (
                    "Invalid parameter: 'response_format' of type 'json_schema' is not supported"
                )
            else:
                spec = fmt.get("json_schema") or {}
                problem = _strict_problem(spec.get("schema")) if spec.get("strict") else ""
                problem = problem and f"Invalid schema for response_format: {problem}"
        if problem:
            with self._lock:
                self.requests += 1
                self.statuses[400] += 1
                self.refusals.append(problem)
        return problem

    def _schema(self, body: dict[str, Any]) -> dict[str, Any] | None:
        fmt = body.get("response_format")
        if not (isinstance(fmt, dict) and fmt.get("type") == "json_schema"):
            return None
        spec = fmt.get("json_schema") or {}
        with self._lock:
            self.schemas[str(spec.get("name", ""))] += 1
        schema = spec.get("schema")
        return schema if isinstance(schema, dict) else None

    def _completion(self, messages: list[dict[str, Any]], model: str, text: str) -> dict[str, Any]:
        prompt_tokens = sum(len(str(m.get("content", ""))) for m in messages) // 4 + 1
        answer_tokens = len(text) // 4 + 1
        usage: dict[str, Any] = {"prompt_tokens": prompt_tokens}
        if self._is_reasoning(model):
            answer_tokens += self.rules.reasoning_tokens
            usage["completion_tokens_details"] = {"reasoning_tokens": self.rules.reasoning_tokens}
        usage.update(completion_tokens=answer_tokens, total_tokens=prompt_tokens + answer_tokens)
        body: dict[str, Any] = {
            "id": f"chatcmpl-{self.requests}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.rules.served_model.format(model=model or "scripted"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": usage,
        }
        if self.rules.system_fingerprint:
            body["system_fingerprint"] = self.rules.system_fingerprint
        return body

    def _decide(
        self, messages: list[dict[str, Any]], method: str, model: str = "", structured: bool = False
    ) -> tuple[int, str, float]:
        r = self.rules
        with self._lock:
            self.requests += 1
            n = self.requests
            key = json.dumps(messages, sort_keys=True)
            digest = hashlib.sha256(key.encode()).hexdigest()
            asked = Asked(method=method, model=model, repeat=self.prompts[digest])
            self.prompts[digest] += 1
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
            text = "" if status != 200 else answer_for(messages, r, self._rng, method, asked)
            self.statuses[status] += 1
        if status == 200 and not structured:
            # A constrained decoder (structured outputs) answers in the schema regardless.
            if garbage or (r.garbage_when and r.garbage_when in key):
                text = "Both ideas have merit; I cannot choose between them."
            if r.think:
                text = f"<think>Weighing the two carefully.</think>\n{text}"
        return status, text, delay
