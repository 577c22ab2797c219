"""Methods compared in the experiments (SPEC §10): baselines and ablations as switches of the co-evolution loop.

Every method runs the same loop (`agent.loop.CoEvolution`) with the same SDK, policy, budgets and — per round — the
same number of ACCEPTED (verified) environments; only the switches of its `Method` differ:

    generation     where a round's environments come from
                   diagnosis:   memory-guided (allocation over difficulty modes, targeted + control batches, replay,
                                novel seeds; SPEC §5)
                   domain_rand: fresh family scenes with every object's attributes drawn from wide hand-specified
                                ranges (`DR_RANGES`) and a resampled layout
                   uniform:     one-factor variants of earlier scenes, factor and operator drawn uniformly
                   success:     one-factor variants of the scenes whose measured success lies inside the band
                                (success rate only: no diagnosis)
                   memory:      no generation: the accepted scenes of another run (its memory), round by round
    critic         the failure critic diagnoses failed rollouts into difficulty modes
    intervene      the critic's factor comes from interventions: the policy re-run in one-factor variants of the
                   failed scene (`CoEvolution.intervene`); off: from the rollout evidence alone
    refine         the diagnoses are refined: targeted-vs-control validation decides which modes are compiled, and
                   the compiler may repair a potential from its check errors (off: every diagnosed mode counts as
                   validated and the compiler gets one attempt)
    potential      Text2potential shaping of the round's training: compiled from the diagnosis, from the task
                   description only ("task"), or none (sparse rewards)
    gen_memory     modes persist across rounds: UCB allocation over all modes seen, their parent scenes, replay
                   (off: a round only acts on the previous round's diagnoses, split evenly)
    train_memory   training programs persist: stored potentials of a mode shape its later scenes and the rollouts of
                   scenes that have one are trained on again in later rounds where the round update reads
                   potentials (branch, critic; never under bc) (off: this round's rollouts and programs only)
    update_policy  policy updates between rounds (off: frozen policy; only the value critic learns)
    round_data     the behaviour-cloning data of a round's update
                   base:    planner demonstrations of seed scenes of every family (half the base SFT's number),
                            the targeted scenes of modes routed to BC and the scenes of execution and too-hard
                            modes (the round data before issue 19; ablation `no_dt`)
                   dt:      D_t — planner demonstrations on every accepted environment of the round and the
                            policy's own successful rollouts — added to the seed-scene demonstrations
                   dt_failed: D_t on the round's failed environments only (every rollout there failed) and
                            the policy's own successes, added to the base data (the default: in the round
                            decision experiment, protocol v3, experiments/round_decision_v3 and
                            docs/RESULTS.md, it was 13-18 points above the base data alone and level with D_t on
                            every environment, at fewer planner calls)
                   dt_only: D_t alone, without the seed-scene demonstrations (measured to lose to them)
    select         action selection when evaluating: the policy mean, or Q-softmax over sampled chunks ("critic")
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: the method table stays light enough for argument parsing
    import numpy as np

    from sim.spec import SceneSpec

GENERATIONS = ("diagnosis", "domain_rand", "uniform", "success", "memory")
POTENTIALS = ("diagnosis", "task", "none")
ROUND_DATA = ("base", "dt", "dt_failed", "dt_only")
SELECTS = ("mean", "critic")


@dataclass(frozen=True)
class Method:
    name: str
    summary: str
    rounds: bool = True
    """False: no generation rounds (the base SFT policy is the result)"""
    generation: str = "diagnosis"
    critic: bool = True
    intervene: bool = True
    refine: bool = True
    potential: str = "diagnosis"
    gen_memory: bool = True
    train_memory: bool = True
    update_policy: bool = True
    select: str = "mean"
    round_data: str = "dt_failed"

    def __post_init__(self):
        if self.generation not in GENERATIONS:
            raise ValueError(f"generation must be one of {', '.join(GENERATIONS)}, got {self.generation!r}")
        if self.potential not in POTENTIALS:
            raise ValueError(f"potential must be one of {', '.join(POTENTIALS)}, got {self.potential!r}")
        if self.round_data not in ROUND_DATA:
            raise ValueError(f"round_data must be one of {', '.join(ROUND_DATA)}, got {self.round_data!r}")
        if self.select not in SELECTS:
            raise ValueError(f"select must be one of {', '.join(SELECTS)}, got {self.select!r}")
        if self.intervene and not self.critic:
            raise ValueError(f"{self.name}: interventions attribute the critic's diagnoses, so they need the critic")
        if self.potential != "none" and not self.critic:
            raise ValueError(f"{self.name}: potentials are compiled for diagnosed modes, so they need the critic")

    @property
    def guided(self) -> bool:
        """Generation follows the critic's difficulty modes."""
        return self.generation == "diagnosis"

    @property
    def samples_rollouts(self) -> bool:
        """The round's rollouts are N sampled ones per environment whatever `Preset.round_rollouts` says: generation
        picks environments by their measured success rate, or the value critic selects chunks (trained on, then
        choosing among, sampled chunks)."""
        return self.generation == "success" or self.select == "critic"

    @property
    def shares_round0(self) -> bool:
        """Round 1 is the common one (novel seed scenes, the base's sampled rollouts, evaluation by the policy
        mean), so an experiment may run it once per seed (`Preset.share_round0`); whether the update is the same
        is checked by its arguments when the cell gets there."""
        return self.rounds and self.update_policy and self.select == "mean" and self.generation in (
            "diagnosis", "uniform", "success")

    def to_dict(self) -> dict:
        return asdict(self)


_BLIND = dict(critic=False, intervene=False, refine=False, potential="none", gen_memory=False, train_memory=False)
CODA = Method("coda", "CoDA: memory-guided generation, critic, validation, Text2potential, persistent memory")

METHODS: dict[str, Method] = {m.name: m for m in (
    Method("sft", "base policy: SFT on the seed demonstrations only (no rounds)", rounds=False, **_BLIND),
    Method("domain_rand", "domain randomization over hand-specified wide attribute and layout ranges",
           generation="domain_rand", **_BLIND),
    Method("uniform", "uniform one-factor environment variants (no diagnosis guidance)", generation="uniform",
           **_BLIND),
    Method("success_guided", "variants of scenes whose success rate lies in the band (success rate only)",
           generation="success", **_BLIND),
    Method("no_memory", "critic diagnoses, validation and potentials, but no memory across rounds",
           gen_memory=False, train_memory=False),
    CODA,
    # ablations of CoDA
    replace(CODA, name="sparse", summary="CoDA with sparse rewards only (no Text2potential shaping)",
            potential="none"),
    replace(CODA, name="potential_from_task", summary="CoDA with potentials compiled from the task description, "
            "not the diagnosis", potential="task"),
    replace(CODA, name="no_refine", summary="CoDA without refinement (no targeted-vs-control validation, one "
            "compiler attempt)", refine=False),
    replace(CODA, name="frozen_critic_select", summary="frozen policy; the value critic learns and selects chunks",
            update_policy=False, select="critic"),
    replace(CODA, name="evidence_critic", summary="CoDA with the critic's factor read from the rollout evidence "
            "alone (no interventions)", intervene=False),
    replace(CODA, name="with_dt", summary="CoDA with D_t on every accepted environment of a round (not only the "
            "failed ones) and the policy's successes added to the round's BC data", round_data="dt"),
    replace(CODA, name="no_dt", summary="CoDA without D_t: the round's BC data is the seed-scene demos and the "
            "scenes of BC-routed, execution and too-hard modes (the round data before issue 19)", round_data="base"),
    replace(CODA, name="gen_memory_only", summary="CoDA with generation memory only", train_memory=False),
    replace(CODA, name="train_memory_only", summary="CoDA with training memory only", gen_memory=False),
    # transfer: another run's memory (scenes and training programs) reused without new generation
    Method("memory_transfer", "train on another run's accepted scenes and training programs (no generation)",
           generation="memory", critic=False, intervene=False, refine=False, potential="none", gen_memory=False, train_memory=True),
)}
MAIN = ("sft", "domain_rand", "uniform", "success_guided", "no_memory", "coda")
"""the methods of the main table, in the paper's order"""


def get_method(name: str) -> Method:
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r}; valid methods: {', '.join(METHODS)}")
    return METHODS[name]


# --- domain randomization: hand-specified wide ranges ------------------------------------------------------------

DR_RANGES = {
    "mass": (0.5, 2.0),  # × the category's mass range: low end × 0.5 … high end × 2.0 (the verifier allows 0.3–3×)
    "friction": (0.3, 1.5),  # absolute sliding friction
    "scale": (0.92, 1.08),  # × the instance's size (wider scales mostly collide and fail verification)
    "damping": (0.5, 5.0),  # × an articulated joint's damping
}
"""hand-specified ranges of domain randomization (set once from the SDK's plausibility limits, not tuned); the data
engine draws from them with `OfflineEngine.domain_randomized` (the sim server's `domain_randomize_scene`)"""


UNIFORM_FACTORS = ("task", "layout", "attributes")


def uniform_variant(engine, spec: SceneSpec, rng: np.random.Generator, batch: str = "uniform"):
    """One variant of `spec` along a factor drawn uniformly, with an operator drawn uniformly among that factor's
    operators (falling back to the others when it does not apply). None when no operator applies."""
    factor = UNIFORM_FACTORS[int(rng.integers(len(UNIFORM_FACTORS)))]
    names = engine.operators(factor)
    ops = tuple(names[i] for i in rng.permutation(len(names)))
    made = engine.variants(spec, factor, 1, seed=int(rng.integers(2**31)), batch=batch, operators=ops)
    return made[0] if made else None
