"""Every judge method, one entry each: the single place that says what a method is.

An entry holds the facts the rest of the code asks about a method: its label, its
default parameters, whether it calls an LLM or is a no-LLM baseline, whether it needs a
reference corpus, how many ideas it needs, whether it needs the ideas' texts, which module
drives it, and how its outputs map onto a study's review-form metrics when the report
measures agreement with the reviewers. Pure Python (no Django): the run lifecycle, the
views, the report provider and the tests read it; a new method is one driver module, one
entry here and its tests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Set
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from judging.methods import prompts
from judging.methods.active_pairs import BATCH_SIZE
from judging.methods.elo import GAMMA, K_MAX, D
from judging.methods.ligbench import PROBE_SD
from judging.methods.ligbench_posterior import LAPSE, PRIOR_SD, SD_STOP, SLOPE
from judging.methods.novelty import ALPHA, BETA
from judging.methods.swiss import DEFAULT_ROUNDS

AUTO = "auto"

LIGBENCH_EPSILON = 0.01
"""The stop rule |Δs| < ε of the LigBench service. The paper does not state ε. With the
"probe" rule (the default selection) the ε-stop is sought once the posterior is narrow,
so ε sets how far a probe must be; 0.01 was chosen with `PROBE_SD` on seeds apart from
those `bench/elo_convergence.py` reports on (docs/ligbench.md has the frontier)."""
LIGBENCH_SELECTION = "probe"
"""The service's choice of references: the paper's chain and stop, references chosen by
what their verdicts tell, then a probe that the ε-stop can end on (`ligbench.py`). The
paper's random order is `"paper"`."""
LIGBENCH_CALIBRATION = 10
"""Scored examples the initial-scoring call shows. The paper's prompt shows three; ten
spread over the score range give a better initial score, with which the chains reach the
paper's Kendall τ (the figures: docs/ligbench.md and docs/measurements.md)."""
ADAPTIVE_MAX_STEPS = 12
"""T_max of the "nearest" selection rule: it runs to this call budget (it rarely stops on
ε: a reference near the idea's own score keeps |S − E| near ½)."""
INFORMATION_MAX_STEPS = 10
"""T_max of the "information" rule (no sd-stop by default): the adaptive option's call
budget (docs/ligbench.md: τ against T_max)."""
LIGBENCH_ESTIMATE = "posterior"
"""What the paper rule reports: the posterior mean given the initial score and the
chain's verdicts; "chain" (the chain's final score) is the paper's. With the same stop
rule and calls the posterior ranks the ideas closer to the truth in
`bench/elo_convergence.py` (the figures: docs/ligbench.md and docs/measurements.md)."""
"""A parameter value that asks the method to choose (e.g. the newest usable corpus)."""

COMMON_PARAMS: Mapping[str, Any] = MappingProxyType(
    {"text": "normalized", "idea_ids": None, "topic_ids": None}
)
"""Parameters every method takes: which text the judge sees, and which ideas."""

SCORES = "scores"
"""Agreement input: per-idea scores on the form's metrics (Judgment rows, one per sample)."""
RATINGS = "ratings"
"""Agreement input: per-idea ratings mapped onto metrics, plus the pairwise outcomes."""
NONE = "none"
"""Not compared with the reviewers: the method judges something other than the ideas."""


@dataclass(frozen=True)
class MethodSpec:
    """What one judge method is. `key` is the stored value of `JudgeRun.method`."""

    key: str
    label: str
    driver: str
    """Dotted path `module:callable` of the driver factory (keyword arguments run, ideas,
    params, study)."""
    llm: bool
    defaults: Mapping[str, Any]
    corpus: bool = False
    """Takes a reference corpus (the `corpus` parameter is resolved when a run is made)."""
    min_ideas: int = 2
    needs_text: bool = True
    """Refuses to run on ideas without the text it would show (or measure)."""
    agreement: str = RATINGS
    rating_metrics: Mapping[str, str] = field(default_factory=dict)
    """Rating dimension → review-form metric it rates (a dimension that is itself a metric
    of the form maps onto it without an entry here)."""
    pairs_from_scores: bool = False
    """Compares ideas with something other than each other (LigBench: reference papers),
    so its preference on a pair reviewers rated is the order of its two scores."""

    @property
    def baseline(self) -> bool:
        return not self.llm

    @property
    def judges_ideas(self) -> bool:
        return self.agreement != NONE

    def params(self) -> dict[str, Any]:
        """A fresh copy of every parameter the method takes, at its default."""
        return {
            **{k: _copy(v) for k, v in COMMON_PARAMS.items()},
            **{k: _copy(v) for k, v in self.defaults.items()},
        }


def _copy(value: Any) -> Any:
    return list(value) if isinstance(value, list) else value


_PAIR_BASELINE = {"group_by": "topic", "sample_pairs": None, "seed": 0, "bt_bootstrap": 200}

METHODS: dict[str, MethodSpec] = {
    spec.key: spec
    for spec in (
        MethodSpec(
            key="direct",
            label="Direct scoring (review form)",
            driver="judging.services.drivers.score:ScoreDriver",
            llm=True,
            defaults={"samples": 1},
            min_ideas=1,
            agreement=SCORES,
        ),
        MethodSpec(
            key="absolute",
            label="Absolute 1–5",
            driver="judging.services.drivers.score:ScoreDriver",
            llm=True,
            defaults={
                "samples": 1,
                "metric": "overall",
                "criterion": "overall quality",
                "description": "",
                "low": 1,
                "high": 5,
            },
            min_ideas=1,
            agreement=SCORES,
        ),
        MethodSpec(
            key="pairwise",
            label="Pairwise round robin (both orders)",
            driver="judging.services.drivers.pairwise:PairDriver",
            llm=True,
            defaults={
                "group_by": "topic",
                "sample_pairs": None,
                "both_orders": True,
                "seed": 0,
                "criterion": "overall quality",
                "description": "",
                "bt_bootstrap": 200,
            },
            rating_metrics={"pairwise": "overall"},
        ),
        MethodSpec(
            key="swiss",
            label="Swiss tournament",
            driver="judging.services.drivers.swiss:SwissDriver",
            llm=True,
            defaults={
                "group_by": "topic",
                "rounds": DEFAULT_ROUNDS,
                "both_orders": False,
                "seed": 0,
                "bt_bootstrap": 200,
            },
            rating_metrics={"swiss": "overall"},
        ),
        MethodSpec(
            key="active_bt",
            label="Active Bradley–Terry pairs",
            driver="judging.services.drivers.active:ActiveDriver",
            llm=True,
            defaults={
                "group_by": "topic",
                # Games per group: "auto" is active_pairs.PAIRS_PER_IDEA (15) per idea,
                # at most one per pair; or a number, at most both orders of every pair.
                "pairs": AUTO,
                # Pairs chosen (and sent concurrently) before the next refit.
                "batch_size": BATCH_SIZE,
                # What a batch shrinks: "width" (the summed interval half-widths),
                # "discordant" (the expected number of misordered pairs) or "density"
                # (each gap's variance weighted by its posterior density at zero).
                "selection": "width",
                "seed": 0,
                "criterion": "overall quality",
                "description": "",
                "bt_bootstrap": 200,
            },
            rating_metrics={"bradley_terry": "overall"},
        ),
        MethodSpec(
            key="ligbench",
            label="LigBench formalisation + Elo",
            driver="judging.services.drivers.ligbench_peers:build",
            llm=True,
            corpus=True,
            # Its overall dimension and its fused novelty rate the form's metrics of the
            # same meaning; contribution and soundness have no counterpart on the form.
            rating_metrics={"elo_rating": "overall", "ligbench_novelty": "novelty"},
            pairs_from_scores=True,
            # With a corpus one idea suffices; the study-ideas fallback needs two.
            min_ideas=1,
            defaults={
                # Related references a chain may meet (the paper's set R); calls are made
                # one at a time only while a chain runs.
                "references": 50,
                # "probe" (default): the paper's chain and ε-stop, references chosen
                # for what their verdicts tell, then probes the stop can end on;
                # "paper": R sampled in a seeded random order (Algorithm 1); with fewer
                # calls: "information", the reference whose verdict tells most under a
                # posterior over the score, to T_max; "nearest", the reference nearest
                # the current Elo score.
                "selection": LIGBENCH_SELECTION,
                # Without a corpus: how many of the study's other ideas each idea meets.
                "peers": 8,
                "group_by": "all",
                "dimensions": list(prompts.LIGBENCH_DIMENSIONS),
                "seed": 0,
                # "auto": the newest reference corpus the study's owner may use, else the
                # study's own ideas (the labelled fallback); None forces the fallback; or a
                # corpus id.
                "corpus": AUTO,
                # "auto": with a corpus, the judge scores the idea after reading
                # `calibration` related references with their debiased scores (one call,
                # which also gives its novelty estimate); without one, 2.5. Or a number
                # for every dimension.
                "initial": AUTO,
                "calibration": LIGBENCH_CALIBRATION,
                # Which related references: "spread" evenly over their score range
                # (lowest first), or "related", the most related ones (the paper shows
                # three and does not say how they are chosen).
                "calibration_choice": "spread",
                # Novelty's similarity part reads this many most related references.
                "novelty_references": 8,
                "retrieval_weight": 0.5,
                "novelty": True,
                "alpha": ALPHA,
                # "auto": calibrated for the embedding in use on the corpus itself
                # (`novelty.calibrate_similarity`, docs/ligbench.md); numbers are used as
                # given (the paper's k = 12, μ = 0.72 were fitted to PAIR-IQ's own
                # embeddings and retrieval).
                "k": AUTO,
                "mu": AUTO,
                "beta": BETA,
                "passes": 3,
                "d": D,
                "k_max": K_MAX,
                "gamma": GAMMA,
                "epsilon": LIGBENCH_EPSILON,
                # "auto": T_max of the selection rule (MAX_STEPS for "paper" and "probe",
                # INFORMATION_MAX_STEPS for "information", ADAPTIVE_MAX_STEPS for
                # "nearest").
                "max_steps": AUTO,
                # Reported score of the Elo rules: "posterior" (mean of the posterior given
                # the initial score and the verdicts) or "chain" (the paper's: the chain's
                # final score). The chain decides when to stop either way.
                "estimate": LIGBENCH_ESTIMATE,
                # The posterior ("information" rule, and "estimate" "posterior"): prior sd
                # around the initial score, the judge model's slope and lapse rate, and the
                # posterior sd at which "information" stops (0: runs to T_max).
                "prior_sd": PRIOR_SD,
                "slope": SLOPE,
                "lapse": LAPSE,
                "sd_stop": SD_STOP,
                # "probe": the posterior sd below which it seeks the ε-stop.
                "probe_sd": PROBE_SD,
            },
        ),
        MethodSpec(
            key="baseline_random",
            label="Baseline: random",
            driver="judging.services.drivers.pairwise:RandomDriver",
            llm=False,
            defaults=dict(_PAIR_BASELINE),
            needs_text=False,
            rating_metrics={"pairwise": "overall"},
        ),
        MethodSpec(
            key="baseline_longer",
            label="Baseline: longer text wins",
            driver="judging.services.drivers.pairwise:LongerDriver",
            llm=False,
            defaults=dict(_PAIR_BASELINE),
            rating_metrics={"pairwise": "overall"},
        ),
        MethodSpec(
            key="validation",
            label="Judge validation on reference-corpus pairs",
            driver="judging.services.drivers.validation:ValidationDriver",
            llm=True,
            corpus=True,
            min_ideas=0,
            needs_text=False,
            agreement=NONE,
            defaults={
                "corpus": AUTO,
                "pairs": 50,
                "both_orders": False,
                "dimensions": list(prompts.LIGBENCH_DIMENSIONS),
                "seed": 0,
                "retrieval_weight": 0.5,
            },
        ),
    )
}


def method_spec(key: str) -> MethodSpec:
    """The entry of a method; KeyError for an unknown one."""
    return METHODS[str(key)]


class MethodKeys(Set[str]):
    """The keys of the registered methods with one property, read from `METHODS` each
    time it is asked (so an entry added later, a test's included, is in it)."""

    def __init__(self, keep: Callable[[MethodSpec], bool]) -> None:
        self._keep = keep

    def __contains__(self, key: object) -> bool:
        spec = METHODS.get(str(key))
        return spec is not None and self._keep(spec)

    def __iter__(self) -> Iterator[str]:
        return iter([k for k, s in METHODS.items() if self._keep(s)])

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __repr__(self) -> str:
        return f"MethodKeys({sorted(self)})"


class _DefaultParams(Mapping[str, dict[str, Any]]):
    """Method key → a fresh copy of its defaults, read from `METHODS` each time."""

    def __getitem__(self, key: str) -> dict[str, Any]:
        return dict(METHODS[key].defaults)

    def __iter__(self) -> Iterator[str]:
        return iter(list(METHODS))

    def __len__(self) -> int:
        return len(METHODS)


LLM_METHODS = MethodKeys(lambda s: s.llm)
BASELINE_METHODS = MethodKeys(lambda s: s.baseline)
CORPUS_METHODS = MethodKeys(lambda s: s.corpus)
DEFAULT_PARAMS: Mapping[str, dict[str, Any]] = _DefaultParams()


def method_choices() -> list[tuple[str, str]]:
    """(key, label) of every method, in the registry's order: the run form's choices."""
    return [(key, spec.label) for key, spec in METHODS.items()]


def method_label(key: str) -> str:
    """A method's label; the key itself for one no longer registered (an old row's)."""
    spec = METHODS.get(str(key))
    return spec.label if spec is not None else str(key)
