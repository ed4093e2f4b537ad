"""The local test server's behaviour profiles, over real HTTP.

A server started with `Rules(profile=...)` answers pairwise and scoring prompts as the
simulated judge of `judging.methods.judge_profiles` does, with self-preference keyed on
the request's model and a marker in the idea text, and repetition noise keyed on how
often the exact prompt was asked before. The first tests pin the answers to the
simulator's definition; the recovery test sends a small synthetic run over HTTP on three
seeds and checks that the reliability panel's figures (`judging.methods.reliability`)
cover the value the injected effects imply, computed here from the profile's numbers,
with intervals no wider than stated bounds (so an interval too wide to say anything
fails too).
"""

from __future__ import annotations

import http.client
import json
import math
import random
from collections import defaultdict
from collections.abc import Hashable
from urllib.parse import urlsplit

import numpy as np
import pytest
from scipy.stats import norm

from judging.methods import judge_profiles as jp
from judging.methods import reliability as rel
from judging.methods.prompts import METHOD_HEADER, absolute_messages, pairwise_messages
from judging.testserver import Rules, TestServer

PROFILE = jp.PROFILES["all"]
OWN = "[style:openai]"
SEEDS = (0, 1, 2)
IDEAS = 60
BOUNDS = {"identical_share": 0.2, "self_preference": 0.3, "score_sd": 0.45}
"""Widest acceptable interval per figure on this small run (docs/judge-reliability.md)."""
WORDS = [
    "model",
    "data",
    "prompt",
    "answer",
    "claim",
    "source",
    "verify",
    "sample",
    "rank",
    "retrieve",
    "train",
]


class Client:
    """One keep-alive connection to the server, as the app's client would hold."""

    def __init__(self, base_url: str, model: str):
        parts = urlsplit(base_url)
        self.conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
        self.path = parts.path + "/chat/completions"
        self.model = model

    def ask(self, messages: list[dict[str, str]], method: str) -> str:
        body = json.dumps({"model": self.model, "messages": messages})
        headers = {"Content-Type": "application/json", METHOD_HEADER: method}
        self.conn.request("POST", self.path, body=body, headers=headers)
        reply = json.loads(self.conn.getresponse().read())
        return reply["choices"][0]["message"]["content"]


@pytest.fixture(scope="module")
def server():
    with TestServer(Rules(profile="all")) as srv:
        yield srv


def _text(rng: random.Random, own: bool) -> str:
    words = round(300 * math.exp(0.45 * rng.gauss(0, 1)))
    body = " ".join(rng.choice(WORDS) for _ in range(words))
    return f"{OWN} {body}" if own else body


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def _p_first(a: str, b: str, own_a: bool, own_b: bool) -> float:
    """P("A") by the profile's definition, from the texts (quality hashed from the text)."""
    la, lb = len(a.split()), len(b.split())
    qa, qb = jp.normal("quality", a), jp.normal("quality", b)
    return _sigmoid(
        PROFILE.discrimination * (qa - qb)
        + PROFILE.position
        + PROFILE.length_preference * (la - lb) / (la + lb)
        + PROFILE.self_preference * (int(own_a) - int(own_b))
    )


def test_a_pair_prompt_is_answered_as_the_simulated_judge_answers_it(server):
    rng = random.Random(7)
    a, b = _text(rng, True), _text(rng, False)
    messages = pairwise_messages(a, b)
    user = messages[-1]["content"]
    own = jp.traits_from_text(a, own_family=True)
    other = jp.traits_from_text(b)
    gpt = Client(server.base_url, "gpt-4o-mini")
    first = jp.pairwise_answer(PROFILE, own, other, jp.uniform(user, "first"))
    assert gpt.ask(messages, "pairwise") == f"[[{first}]]"
    for k in (1, 2, 3):
        again = (jp.uniform(user, "again", k), jp.uniform(user, "fresh", k))
        expected = jp.pairwise_answer(PROFILE, own, other, jp.uniform(user, "first"), again)
        assert gpt.ask(messages, "pairwise") == f"[[{expected}]]"


def test_the_marker_makes_an_idea_the_judges_own_only_for_a_judge_of_that_family(server):
    rng = random.Random(8)
    ideas = [(_text(rng, True), _text(rng, False)) for _ in range(40)]
    claude = Client(server.base_url, "claude-3-5-haiku")
    for a, b in ideas:
        user = pairwise_messages(a, b)[-1]["content"]
        neither = jp.pairwise_answer(
            PROFILE, jp.traits_from_text(a), jp.traits_from_text(b), jp.uniform(user, "first")
        )
        assert claude.ask(pairwise_messages(a, b), "pairwise") == f"[[{neither}]]"
    # For an openai judge the marked idea gains the profile's 0.8 log-odds: some answers flip.
    gpt = Client(server.base_url, "gpt-4o")
    flipped = sum(
        gpt.ask(pairwise_messages(a, b), "pairwise")
        != claude.ask(pairwise_messages(a, b), "pairwise")
        for a, b in ideas[:20]
    )
    assert flipped > 0


def test_an_unknown_profile_is_refused_with_the_known_names():
    with pytest.raises(ValueError, match="unknown profile 'loud'.*neutral"):
        Rules(profile="loud")


def _score_variance(mean: float, sd: float, lo: int, hi: int) -> float:
    """Var of round(mean + sd·Z) cut to [lo, hi]."""
    ks = np.arange(lo, hi + 1)
    upper = np.where(ks == hi, np.inf, ks + 0.5)
    lower = np.where(ks == lo, -np.inf, ks - 0.5)
    probs = norm.cdf((upper - mean) / sd) - norm.cdf((lower - mean) / sd)
    m = float(probs @ ks)
    return float(probs @ (ks - m) ** 2)


def _run(server, seed: int):
    """A small synthetic run over HTTP: 60 ideas (half marked), 240 pairs of which 100 are
    asked twice, 40 ideas' absolute scores asked twice; the figures and the values they
    should find."""
    rng = random.Random(seed)
    texts = [_text(rng, own=k % 2 == 0) for k in range(IDEAS)]
    own = [k % 2 == 0 for k in range(IDEAS)]
    gpt = Client(server.base_url, "gpt-4o")
    pairs = rng.sample([(i, j) for i in range(IDEAS) for j in range(IDEAS) if i != j], 240)
    answers: dict[Hashable, list[Hashable | None]] = defaultdict(list)
    for i, j in pairs + pairs[:100]:
        answers[(i, j)].append(gpt.ask(pairwise_messages(texts[i], texts[j]), "pairwise"))
    scores: dict[Hashable, list[float | None]] = defaultdict(list)
    for k in list(range(40)) * 2:
        reply = gpt.ask(absolute_messages(texts[k], low=1, high=10), "absolute")
        scores[k].append(float(json.loads(reply)["score"]))

    p = {ij: _p_first(texts[ij[0]], texts[ij[1]], own[ij[0]], own[ij[1]]) for ij in pairs}
    r = PROFILE.repetition_noise
    identical_expected = float(
        np.mean([(1 - r) + r * (p[ij] ** 2 + (1 - p[ij]) ** 2) for ij in pairs[:100]])
    )
    mixed = [(i, j) for i, j in pairs if own[i] != own[j]]
    human = np.random.default_rng(seed)
    rows, gaps = [], []
    for i, j in mixed:
        o, x = (i, j) if own[i] else (j, i)
        judge_p = p[(i, j)] if own[i] else 1 - p[(i, j)]
        # Two reviewers who prefer by quality alone, as in judge_profiles.simulate.
        human_p = _sigmoid(1.5 * (jp.normal("quality", texts[o]) - jp.normal("quality", texts[x])))
        won = answers[(i, j)][0] == ("[[A]]" if own[i] else "[[B]]")
        rows.append((o, x, float(won), float(np.mean(human.random(2) < human_p))))
        gaps.append(judge_p - human_p)
    variances = []
    for k in range(40):
        mean = (
            PROFILE.score_intercept
            + PROFILE.score_slope * jp.normal("quality", texts[k])
            + PROFILE.score_self * own[k]
            + PROFILE.idea_noise * jp.normal("idea", texts[k], "absolute")
        )
        variances.append(_score_variance(mean, PROFILE.repeat_sd, 1, 10))
    return {
        "identical_share": (rel.identical_share(answers, n_boot=300), identical_expected),
        "self_preference": (
            rel.self_preference(rows, n_boot=300).difference,
            float(np.mean(gaps)),
        ),
        "score_sd": (rel.score_sd(scores, n_boot=300), math.sqrt(float(np.mean(variances)))),
    }


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_each_injected_effect_is_recovered_over_http_by_a_narrow_interval(server, seed):
    for figure, (estimate, expected) in _run(server, seed).items():
        assert estimate.low <= expected <= estimate.high, (figure, estimate, expected)
        assert estimate.high - estimate.low <= BOUNDS[figure], (figure, estimate)
