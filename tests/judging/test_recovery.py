"""Injected judge behaviour is recovered by the reliability panel's figures.

A synthetic study (`judging.methods.judge_profiles.simulate`) is judged by a profile
with known effects; each panel figure (`judging.methods.reliability`) is computed from it
as a run would compute it, over ten seeds. Each figure's 95 % interval must cover the
value the injected effect implies in at least 8 of the 10 seeds (a correct 95 % interval
fails that about 1 % of the time), and its mean width must stay within the bound stated
in docs/judge-reliability.md, so an interval too wide to say anything fails too.

The value an effect implies is computed here from the profile's definition, not by the
panel's code: the expected identical-verdict share and score SD of the repeated prompts
given the simulated ideas, the expected judge-minus-reviewer result on the mixed pairs,
the population coefficients of the style model (statsmodels' Logit on a study fifty
times larger) and the least-squares calibration line of the reviewers' expected means
on the judge's scores.
"""

from __future__ import annotations

import math
from collections import defaultdict
from functools import cache

import numpy as np
import pytest
import statsmodels.api as sm
from scipy.stats import norm

from judging.methods import reliability as rel
from judging.methods.judge_profiles import PROFILES, BehaviourProfile, SyntheticStudy, simulate

# The runs are cached per process: under xdist every test of the module goes to one worker.
pytestmark = [pytest.mark.xdist_group("judging-recovery"), pytest.mark.slow]

SEEDS = range(10)
SIZE = {"n_ideas": 150, "n_pairs": 1200, "repeat_share": 0.3}
N_BOOT = 150
MIN_COVERED = 8
BOUNDS = {
    "identical_share": 0.12,
    "score_sd": 0.45,
    "self_preference": 0.22,
    "length": 2.5,
    "position": 0.55,
    "calibration_slope": 0.45,
}
"""Widest acceptable mean interval width per figure (docs/judge-reliability.md)."""


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def _p_first(profile: BehaviourProfile, study: SyntheticStudy, a: int, b: int) -> float:
    ia, ib = study.ideas[a], study.ideas[b]
    d_len = (ia.length - ib.length) / (ia.length + ib.length)
    return _sigmoid(
        profile.discrimination * (ia.quality - ib.quality)
        + profile.position
        + profile.length_preference * d_len
        + profile.self_preference * (int(ia.own_family) - int(ib.own_family))
    )


def _rounded_moments(mean: float, sd: float, lo: int, hi: int) -> tuple[float, float]:
    """Mean and variance of round(mean + sd·Z) cut to [lo, hi]."""
    ks = np.arange(lo, hi + 1)
    if sd == 0:
        value = float(min(max(round(mean), lo), hi))
        return value, 0.0
    upper = np.where(ks == hi, np.inf, ks + 0.5)
    lower = np.where(ks == lo, -np.inf, ks - 0.5)
    probs = norm.cdf((upper - mean) / sd) - norm.cdf((lower - mean) / sd)
    m = float(probs @ ks)
    return m, float(probs @ (ks - m) ** 2)


# --- the panel's figures, computed as a run computes them ------------------------------


def _repeated_answers(study: SyntheticStudy) -> dict[tuple[int, int], list[str]]:
    answers: dict[tuple[int, int], list[str]] = defaultdict(list)
    for call in study.pair_calls:
        answers[(call.first, call.second)].append(call.answer)
    return {k: v for k, v in answers.items() if len(v) > 1}


def _direct_by_idea(study: SyntheticStudy) -> dict[int, list[int]]:
    scores: dict[int, list[int]] = defaultdict(list)
    for call in study.direct_calls:
        scores[call.idea].append(call.score)
    return scores


def _mixed_pairs(study: SyntheticStudy) -> list[tuple[int, int, float, float, int, int]]:
    """(own, other, judge result for own, human result for own, first, second)."""
    rows = []
    for call in study.pair_calls:
        if call.repeat or (call.first, call.second) not in study.human_pairs:
            continue
        own_first = study.ideas[call.first].own_family
        own, other = (call.first, call.second) if own_first else (call.second, call.first)
        judge = float((call.answer == "A") == own_first)
        human = float(np.mean(study.human_pairs[(call.first, call.second)]))
        rows.append(
            (own, other, judge, human if own_first else 1.0 - human, call.first, call.second)
        )
    return rows


def _style_inputs(study: SyntheticStudy):
    features = {
        i: {"length": d.length, "markdown_density": d.markdown_density, "list_items": d.list_items}
        for i, d in enumerate(study.ideas)
    }
    groups = {i: d.condition for i, d in enumerate(study.ideas)}
    games = [
        (c.first, c.second, 1.0 if c.answer == "A" else 0.0)
        for c in study.pair_calls
        if c.repeat == 0
    ]
    return games, features, groups


def figures(study: SyntheticStudy, seed: int) -> dict[str, rel.Estimate]:
    out: dict[str, rel.Estimate] = {
        "identical_share": rel.identical_share(_repeated_answers(study), n_boot=N_BOOT, seed=seed),
        "score_sd": rel.score_sd(
            {k: v for k, v in _direct_by_idea(study).items() if len(v) > 1},
            n_boot=N_BOOT,
            seed=seed,
        ),
        "self_preference": rel.self_preference(
            [(o, x, j, h) for o, x, j, h, _, _ in _mixed_pairs(study)], n_boot=N_BOOT, seed=seed
        ).difference,
    }
    games, features, groups = _style_inputs(study)
    _, _, betas = rel.style_bt_intervals(games, features, groups, n_boot=N_BOOT, seed=seed)
    out.update({k: betas[k] for k in ("length", "markdown_density", "list_items", "position")})
    judge = {i: float(np.mean(v)) for i, v in _direct_by_idea(study).items()}
    human = {i: float(np.mean(v)) for i, v in study.human_scores.items()}
    out["calibration_slope"] = rel.calibration(judge, human, n_boot=N_BOOT, seed=seed)["slope"]
    return out


# --- what the injected effects imply, computed independently ---------------------------


def _population_style(profile: BehaviourProfile) -> dict[str, float]:
    study = simulate(profile, seed=999, n_ideas=3000, n_pairs=60000, repeat_share=0.0)
    games, features, groups = _style_inputs(study)
    conditions = sorted({groups[i] for i in groups})
    rows, y = [], []
    for a, b, s in games:
        fa, fb = features[a], features[b]
        row = [float(groups[a] == c) - float(groups[b] == c) for c in conditions[1:]]
        row += [
            (fa[k] - fb[k]) / (fa[k] + fb[k]) if fa[k] + fb[k] else 0.0
            for k in rel.STYLE_COVARIATES
        ]
        row.append(1.0)
        rows.append(row)
        y.append(s)
    params = sm.Logit(np.array(y), np.array(rows)).fit(disp=0).params
    k = len(conditions) - 1
    return dict(zip([*rel.STYLE_COVARIATES, "position"], params[k:].tolist(), strict=True))


_population = cache(_population_style)


def implied(profile_name: str, study: SyntheticStudy) -> dict[str, float]:
    profile = PROFILES[profile_name]
    shares = [
        1.0 - 2.0 * profile.repetition_noise * p * (1.0 - p)
        for p in (_p_first(profile, study, a, b) for a, b in _repeated_answers(study))
    ]
    lo, hi = profile.scale
    variances = []
    for i in (k for k, v in _direct_by_idea(study).items() if len(v) > 1):
        idea = study.ideas[i]
        mean = (
            profile.score_intercept
            + profile.score_slope * idea.quality
            + profile.score_self * int(idea.own_family)
            + profile.idea_noise * study.z_idea[i]
        )
        variances.append(_rounded_moments(mean, profile.repeat_sd, lo, hi)[1])
    gaps = []
    for own, other, _, _, first, second in _mixed_pairs(study):
        p = _p_first(profile, study, first, second)
        judge = p if own == first else 1.0 - p
        q = study.ideas[own].quality - study.ideas[other].quality
        gaps.append(judge - _sigmoid(study.human_discrimination * q))
    by_idea = _direct_by_idea(study)
    ids = sorted(by_idea)
    x = np.array([np.mean(by_idea[i]) for i in ids])
    expected_human = np.array(
        [
            _rounded_moments(
                study.human_intercept + study.human_slope * study.ideas[i].quality, 1.3, 1, 10
            )[0]
            for i in ids
        ]
    )
    slope = sm.OLS(expected_human, sm.add_constant(x)).fit().params[1]
    return {
        "identical_share": float(np.mean(shares)),
        "score_sd": math.sqrt(float(np.mean(variances))),
        "self_preference": float(np.mean(gaps)),
        **_population(profile),
        "calibration_slope": float(slope),
    }


def _runs(profile_name: str) -> list[tuple[dict[str, rel.Estimate], dict[str, float]]]:
    out = []
    for seed in SEEDS:
        study = simulate(PROFILES[profile_name], seed=seed, **SIZE)
        out.append((figures(study, seed), implied(profile_name, study)))
    return out


_cached_runs = cache(_runs)


@pytest.mark.parametrize(
    ("profile", "figure"),
    [
        ("all", "identical_share"),
        ("all", "score_sd"),
        ("all", "self_preference"),
        ("all", "length"),
        ("all", "position"),
        ("all", "calibration_slope"),
        ("neutral", "self_preference"),
        ("neutral", "length"),
        ("all", "markdown_density"),
        ("all", "list_items"),
    ],
)
def test_each_injected_effect_is_covered_by_a_narrow_interval(profile, figure):
    """The "all" profile injects every effect at once (each must be told from the others);
    "neutral" none (no effect may be found where there is none)."""
    runs = _cached_runs(profile)
    covered = [
        est.low <= target[figure] <= est.high for est, target in ((f[figure], t) for f, t in runs)
    ]
    assert sum(covered) >= MIN_COVERED, (figure, [(f[figure], t[figure]) for f, t in runs])
    if figure in BOUNDS:
        width = float(np.mean([f[figure].high - f[figure].low for f, _ in runs]))
        assert width <= BOUNDS[figure], (figure, width)
