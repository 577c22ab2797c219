"""Run presets: the budgets of a co-evolution run (SPEC §8). `quick` fits two CPU cores; `paper` is the paper's."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace

from policy.config import (
    CRITIC_UPDATES,
    DEMOS_PER_FAMILY,
    EVAL_PER_SUITE,
    POLICY_UPDATES,
    ROLLOUTS_PER_SCENE,
    SFT_UPDATES,
)
from sim.constants import (
    DEFAULT_MODE_KEY,
    DISTRIBUTIONS,
    EPS_NOVEL,
    EPS_REPLAY,
    FAMILIES,
    MODE_KEYS,
    ROBOTS,
    SUCCESS_BAND,
)

ROUND_UPDATES = ("bc", "branch", "critic")
"""the policy updates a round may use (`Preset.round_update`)"""
TARGETED_OPERATORS = ("all", "recreate")
"""what a targeted batch's variants may do (`Preset.targeted_operators`)"""
TARGETED_BATCHES = ("vary", "keep")
"""which factor a mode's targeted and control batches vary (`Preset.targeted_batches`)"""
NOVEL_SCENES = ("seed", "domain_rand", "uniform")
"""what a guided round's novel environments are (`Preset.novel_scenes`)"""
ROUND_ROLLOUTS = ("sample", "mean")
"""how a round's rollouts choose actions (`Preset.round_rollouts`)"""
ROUND_DEMOS = ("round", "accumulated")
"""whose planner demonstrations a round's update clones (`Preset.round_demos`)"""
INTERVENTIONS = ("resample", "undo", "familiar")
"""what an intervention variant changes (`Preset.intervention`)"""
EXECUTION_VARIANTS = {"none": None, "nearby": ("nearby",), "other_start": ("other_start",)}
"""`Preset.execution_variants` -> the layout operators of an execution mode's targeted batch (None: no batch)"""


def external_tasks(text: str) -> list[str]:
    """'robosuite:Lift,Door+metaworld:push-v3' -> ['robosuite:Lift', 'robosuite:Door', 'metaworld:push-v3'] (the
    trainer's evaluate_external tasks); '' -> []. ValueError for a part without BENCHMARK:TASK."""
    out: list[str] = []
    for part in [x for x in text.replace("+", " ").split() if x]:
        benchmark, sep, tasks = part.partition(":")
        if not sep or not benchmark or not tasks.strip(","):
            raise ValueError(f"external target {part!r}: give BENCHMARK:TASK[,TASK...], e.g. robosuite:Lift,Door")
        out += [f"{benchmark}:{t}" for t in tasks.split(",") if t and f"{benchmark}:{t}" not in out]
    return out



@dataclass(frozen=True)
class Preset:
    name: str
    families: tuple[str, ...] = FAMILIES
    """task families co-evolved in this run"""
    demos_per_family: int = DEMOS_PER_FAMILY
    """planner demonstrations per family for the base SFT"""
    sft_updates: int = SFT_UPDATES
    """behaviour-cloning updates of the base policy"""
    base_distribution: str = "train"
    """scenes of the base's demos: "train" (the whole train side) or "seed" (its narrow seed distribution, like the
    paper's seed scenes; issue 20's base decision, experiments/base_v1)"""
    robot: str = "gripper"
    """the run's embodiment ("gripper" | "panda"): the base's demos, the policy, its evaluations, and every scene
    the sim and verifier servers store and verify (`coda serve --robot`)"""
    round_base_demos: int = -1
    """base demos per family kept in every round's BC mix (the base-demo mix); -1: demos_per_family // 2"""
    base_eval_in: int = 128
    """scenes per family of the base's evaluation on its own seed distribution (suite "seed"; base_distribution
    "seed" only)"""
    rounds: int = 2
    """generation rounds"""
    seed_scenes_per_family: int = 6
    """seed scenes per family in round 0 (before any mode exists)"""
    targeted_per_family: int = 6
    """B: targeted environments per family per round (a control batch of the same size comes with them)"""
    rollouts_per_scene: int = ROLLOUTS_PER_SCENE
    """N: rollouts per valid environment"""
    max_diagnoses: int = 6
    """C: failed rollouts examined per (family, batch) stratum"""
    intervention_variants: int = 2
    """variants per scene factor in which the critic's interventions re-run the policy (0: none)"""
    intervention: str = "resample"
    """what an intervention's variant changes: "resample" (the factor drawn anew from the train side), "undo" (the
    counterfactual that takes the suspected cause away: crowding moved off the task's objects, their own attributes
    back, a familiar template for an unfamiliar task) or "familiar" (the factor redrawn from the base's narrow seed
    distribution: a failure that a familiar value turns into a success is that factor's); `coda bench attribution`
    compares them"""
    execution_variants: str = "none"
    """what the data engine generates for an execution mode (found by intervention: no one-factor change turned its
    failures into successes): "none" — no variants, BC on its scenes' planner demos; "nearby" — targeted batches
    of near-duplicates of its failing scenes (`sim.engine.variations.nearby`: the task's object 1-3 cm away and
    slightly turned) against attribute-varied controls, so its difficulty is kept instead of redrawn"""
    targeted_operators: str = "all"
    """the variation operators of a mode's targeted batches: "all" — the phase's operators, most specific first,
    falling back to `resample` (and `fewer_goals` for tasks), which redraw or ease the diagnosed factor; "recreate"
    — only those that recreate the difficulty (`agent.roles.engine.recreating_operators`): in the CoDA runs of
    grid v2, rounds v1 and replicate v1 targeted rollouts succeeded at 4-8% under crowd_grasp_side, heavier and
    rotate but at 39-48% under a layout resample or fewer_goals, against 17-23% in control batches. Recreate v1
    (experiments/recreate_v1): "recreate" doubled targeting precision but was −2.9 ± 2.0 points in-distribution,
    so "all" stays the default"""
    targeted_batches: str = "vary"
    """which factor a mode's targeted batches vary (and replay variants of its own scenes): "vary" — the diagnosed
    factor (by `targeted_operators`), the control batch another; "keep" — another factor (resampled), keeping the
    diagnosed factor's value that failed, while the control batch redraws the diagnosed factor (`resample`).
    With attribution by intervention a mode's factor is the one whose redraw turned the failure into a success, so
    redrawing it tends to remove the difficulty: under mean rollouts targeted batches succeeded at 38-62%, their
    controls (the diagnosed factor kept) at 32-50% (rollout v1). "keep" recreates the difficulty in new contexts
    and makes the validation test (targeted < control) the intervention's own claim. Keep v1 (experiments/keep_v1,
    six seeds): its targeted batches were harder than their controls in 5 of 6 seeds, but in-distribution −2.3 ±
    2.8 points against "vary", so "vary" stays the default"""
    mode_key: str = DEFAULT_MODE_KEY
    """what a diagnosis must share with a difficulty mode to join it (the memory's `record_diagnosis`
    cluster_by): "factor" — its factor alone, the phase the mode's founding attribute (two failures of one scene in
    different phases share a mode; the default by mode key v1, experiments/modekey_v1); "factor_phase" — its
    factor and phase (SPEC §4 as first built; grids v1–v2.1 ran with it)"""
    novel_scenes: str = "seed"
    """the novel environments of a guided round after the first (its ε_novel share and the units of modes with no
    scene variants): "seed" — fresh scenes of the family samplers; "domain_rand" — the same scenes with a resampled
    layout and attributes drawn from the hand-specified ranges of domain randomization (`agent.methods.DR_RANGES`,
    as the `domain_rand` baseline draws them); "uniform" — variants of the scenes accepted in earlier rounds along a
    uniformly drawn factor, as the `uniform` baseline draws them (not success-guided's band: a round's mean-action
    rollout gives each scene one outcome). Round 1 is the common round of every method either way"""
    round_rollouts: str = "mean"
    """how the policy acts in a round's rollouts (and the learning-progress check after its update): "mean" — the
    policy's mean action, as the evaluations and the interventions act, one rollout per environment (more would
    repeat it), so the failures diagnosed, the D_t scenes (`dt_failed`: those it fails) and the targeted-vs-control
    test are the evaluated policy's, not its sampling noise's (a third of the sampled failures the interventions
    rerun are solved by the mean action); the default by rollout v1 (experiments/rollout_v1, six seeds:
    in-distribution +3.4 ± 1.8 over seeds against "sample", half the rollouts); "sample" — sampled actions,
    `rollouts_per_scene` per environment (as the paper's N rollouts). Methods that select with the critic roll out with it either way"""
    round_demos: str = "accumulated"
    """the planner demonstrations (D_t) of a round's update: "accumulated" — on this round's environments and
    every earlier round's (the paper's accumulated buffer: K_π updates per round on D_1 ∪ … ∪ D_t; the planner runs
    once per scene, so only the data grows, not the updates; the default by buffer v1, experiments/buffer_v1:
    in-distribution not worse than "round", the paper's design); "round" — on this round's environments only
    (grids v1–v2.1). The policy's own successes and the base-demo mix are this round's either way"""
    critic_updates: int = CRITIC_UPDATES
    """K_Q: critic updates per round"""
    policy_updates: int = POLICY_UPDATES
    """K_π: policy updates per round"""
    eval_per_suite: int = EVAL_PER_SUITE
    """evaluation scenes per (family, suite) before the first round and after the last (paired: the same scenes)"""
    interim_eval_per_suite: int = 0
    """evaluation scenes per (family, suite) after the other rounds (the learning curve: the first scenes of the
    final evaluation's); 0: eval_per_suite"""
    band: tuple[float, float] = SUCCESS_BAND
    """success band of a mode's variants"""
    eps_novel: float = EPS_NOVEL
    """share of the round's generation units for novel environments"""
    eps_replay: float = EPS_REPLAY
    """share of the round's generation units for replay of seen modes (with generation memory)"""
    lora: bool = False
    """fine-tune LoRA adapters in rounds (True) or all weights"""
    external: str = ""
    """external target tasks (BENCHMARK:TASK,..., as `coda eval --external`; `coda run --target external:...`): the
    policy is evaluated on them before the first round and after the last (`external_eval_n` episodes per task and
    seed group, `external_eval_seeds` groups: the same episodes for every method), and after every round but the
    last the critic diagnoses the failures of a probe of them (`external_probe_n` episodes per task, seed groups
    apart from the evaluation's) from their external evidence; a scene of this simulator resembling each failure
    (`sim.engine.proxy`) becomes its scene, so the next round's data engine aims at those modes. The external tasks
    are only evaluated, never trained on; methods without a critic only evaluate them"""
    external_start: bool = True
    """a scene resembling an external failure starts the hand where the episode's did (position, tilt, finger
    opening: `sim.spec.RobotStart`) instead of at this simulator's home. On by full proxy v2's rule
    (experiments/full_proxy_v2: proxies with the external start and task vs without, robosuite +2.75 ± 1.34 points,
    the mirrored tasks in this simulator +44.7, the seed suite at home −2.6 ± 2.1; start alone, start v1, was
    +1.0 ± 1.1)"""
    external_template: bool = True
    """a scene resembling an external failure states the external task by its template of the family (the
    adapter's `template`: robosuite Lift → `pp_lift`, Stack → `st_on`, PickPlaceCan → `pp_in`, Door → `ar_open`)
    instead of keeping its seed scene's task; on with `external_start` (full proxy v2)"""
    external_gripper_rate: bool = True
    """a scene resembling an external failure closes its fingers as slowly as the benchmark's gripper does (the
    adapter's `gripper_rate`: robosuite's Panda 0.4 of the command per action, a full close in 5 actions;
    `sim.spec.RobotStart.gripper_rate`; with `external_start`), so its planner demonstrations wait for the fingers;
    off: they close at once. On by gripper rate v1's rule (experiments/gripper_rate_v1: the same full proxies with
    the rate vs without, robosuite +2.88 ± 0.88 points, Lift 8 → 20.5 %, the seed suite at home −3.9 ± 2.1)"""
    external_probe_n: int = 24
    """episodes per external task of a round's probe (at most `external_proxies` failures per task are diagnosed);
    24 since external target v3 (8 before)"""
    external_proxies: int = 24
    """failures per external task of a probe that are diagnosed and get a scene resembling them (0: `max_diagnoses`,
    what runs before external target v3 did)"""
    external_probe_all: bool = False
    """methods without a critic probe the external tasks too and get the scenes resembling the failures (no
    diagnoses, no modes; with `external_dt` in their D_t): an ablation that gives a baseline the probe scenes
    without CoDA's targeting"""
    train_replicate: int = 0
    """the training replicate of the rounds after the common first: > 0 reseeds each of their policy updates'
    sampling (the trainer's `replicate`), so a cell run again gives another replicate of the same loop from the
    same base and shared round 1 — the floor under a difference between two cells; 0: the policy's own streams"""
    external_dt: bool = True
    """the verified scenes resembling earlier probes' failures (`external_targets`) join a round's D_t: the planner's
    demonstrations on them, as on the round's own accepted environments (off: they only seed their modes'
    variants). The external tasks themselves are still never trained on: the scenes are this simulator's. On, with
    probes of 24 and 24 scenes per task, by external target v3's rule (experiments/external_target_v3: robosuite
    CoDA 17.3 % vs 5.0 for the same loop without them (v2c), +12.3 ± 1.8 points paired; this simulator's mean OOD
    44.3 vs 47.6)"""
    external_takeover: bool = False
    """with `external_dt`: before each round's update after the first, the policy is rolled out once in each scene
    resembling an earlier probe's failure and, where it fails, the planner takes over at the failure's diagnosed
    step (the trainer's `takeover_scene_ids`); the certified corrective windows — a reopen and regrasp after a
    missed grasp, a pick-up after a drop — join the round's BC data. Off: the scenes give only from-reset demos,
    and nothing shows the policy a retry (lift bimodal v1: a missed grasp on robosuite is never retried)"""
    round_takeover: bool = False
    """the round's update also clones the planner's corrective windows from the round's own failed rollouts: where
    each failure starts (its diagnosed step, the env restored exactly from the rollout's trace) the planner takes
    over, and the certified windows join the BC data beside D_t (the trainer's `takeover_failed`; one planner call
    per failed scene, no new rollouts). `external_takeover` does the same on the probe scenes"""
    external_eval_n: int = 50
    """episodes per external task and seed group of the evaluations before and after"""
    external_eval_seeds: int = 1
    """seed groups of the external evaluations before and after"""
    round_update: str = "bc"
    """the policy update of a round: "bc" (behaviour cloning on the round's BC data; the default by protocol v3 of
    the round decision experiment, where branch AWR on the same data was 3-5 points lower at ≈ 7x the CPU) or
    "branch" (branch AWR with the BC data mixed in) or "critic" (the chunk critic trained on the round's rollouts
    with potential-based shaping by the compiled potentials, then AWR on the rollouts with the critic's own
    advantages plus the BC data; `dt_shaped_mix` of `coda bench round`, protocol v4). Text2potential shapes the
    branch and critic updates (and the critic where critic selection reads it): with "bc" the compiled potentials
    are checked and stored but train nothing"""
    bc_balance: bool = True
    """balance a round's BC data by family (`policy.train.balance_families`, the trainer's `balance_families`): the
    default by round decision v5 (`coda bench round --family all`, experiments/round_decision_v5: +3.4 ± 1.4
    points in-distribution over the unbalanced D_t mix, 400 paired scenes, 2 seeds × 3 replicates)"""
    share_round0: bool = False
    """experiments only (`coda experiment`): run round 1 once per seed and let every method whose round 1 is that
    same computation (novel seed scenes, the base's rollouts, one update; `Method.shares_round0`) start from a copy
    of it (`agent.experiment.shared`); a cell whose round-1 training arguments differ trains itself. Protocol v2.1"""
    extra: dict = field(default_factory=dict)

    def __post_init__(self):
        for name in ("demos_per_family", "sft_updates", "base_eval_in", "rounds", "targeted_per_family", "rollouts_per_scene",
                     "eval_per_suite", "interim_eval_per_suite", "train_replicate"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.round_base_demos < -1 or self.round_base_demos == 0:
            raise ValueError(f"round_base_demos must be >= 1, or -1 for demos_per_family // 2; got "
                             f"{self.round_base_demos}")
        for name in ("external_probe_n", "external_eval_n", "external_eval_seeds"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.external_proxies < 0:
            raise ValueError(f"external_proxies must be >= 0 (0: max_diagnoses), got {self.external_proxies}")
        external_tasks(self.external)  # the syntax; the trainer checks the benchmarks' task names
        if self.external_takeover and not self.external_dt:
            raise ValueError("external_takeover needs external_dt: its windows come from the scenes resembling the "
                             "probes' failures, which only external_dt keeps for the rounds")
        if self.base_distribution not in DISTRIBUTIONS:
            raise ValueError(f"base_distribution must be one of {', '.join(DISTRIBUTIONS)}, "
                             f"got {self.base_distribution!r}")
        if self.robot not in ROBOTS:
            raise ValueError(f"robot must be one of {', '.join(ROBOTS)}, got {self.robot!r}")
        if self.intervention not in INTERVENTIONS:
            raise ValueError(f"intervention must be one of {', '.join(INTERVENTIONS)}, got {self.intervention!r}")
        if self.execution_variants not in EXECUTION_VARIANTS:
            raise ValueError(f"execution_variants must be one of {', '.join(EXECUTION_VARIANTS)}, "
                             f"got {self.execution_variants!r}")
        if self.targeted_batches not in TARGETED_BATCHES:
            raise ValueError(f"targeted_batches must be one of {', '.join(TARGETED_BATCHES)}, "
                             f"got {self.targeted_batches!r}")
        if self.targeted_operators not in TARGETED_OPERATORS:
            raise ValueError(f"targeted_operators must be one of {', '.join(TARGETED_OPERATORS)}, "
                             f"got {self.targeted_operators!r}")
        if self.mode_key not in MODE_KEYS:
            raise ValueError(f"mode_key must be one of {', '.join(MODE_KEYS)}, got {self.mode_key!r}")
        if self.round_rollouts not in ROUND_ROLLOUTS:
            raise ValueError(f"round_rollouts must be one of {', '.join(ROUND_ROLLOUTS)}, got {self.round_rollouts!r}")
        if self.round_demos not in ROUND_DEMOS:
            raise ValueError(f"round_demos must be one of {', '.join(ROUND_DEMOS)}, got {self.round_demos!r}")
        if self.novel_scenes not in NOVEL_SCENES:
            raise ValueError(f"novel_scenes must be one of {', '.join(NOVEL_SCENES)}, got {self.novel_scenes!r}")
        if self.round_update not in ROUND_UPDATES:
            raise ValueError(f"round_update must be one of {', '.join(ROUND_UPDATES)}, got {self.round_update!r}")
        unknown = set(self.families) - set(FAMILIES)
        if unknown:
            raise ValueError(f"unknown families {sorted(unknown)}; valid: {', '.join(FAMILIES)}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Preset:
        """The preset a run recorded (`to_dict`, e.g. state.json's "preset"); a field added since takes the value
        that does what the code did before it existed (`BEFORE_FIELD`), else its default."""
        known = {f.name for f in fields(cls)}
        data = {**{k: v for k, v in BEFORE_FIELD.items() if k not in data}, **data}
        return cls(**{k: tuple(v) if k in ("families", "band") else v for k, v in data.items() if k in known})

    def round_mix_demos(self) -> int:
        """Base demos per family in a round's BC mix."""
        return max(1, self.demos_per_family // 2) if self.round_base_demos < 0 else max(1, self.round_base_demos)

    def round_rollout_args(self, sampled: bool = False) -> dict:
        """collect_rollouts' `mode` and `per_scene` of a round's rollouts (`round_rollouts`); `sampled`: for a method
        that needs N sampled rollouts per environment whatever `round_rollouts` says (`Method.samples_rollouts`)."""
        return {"mode": "mean", "per_scene": 1} if self.round_rollouts == "mean" and not sampled else {
            "mode": "sample", "per_scene": self.rollouts_per_scene}

    def budget(self) -> int:
        """Generation units per round across families (targeted + novel + replay)."""
        return self.targeted_per_family * len(self.families)


RUN_SEEDS = range(100)
"""the seeds a run may take: each has its own block of scene-sampler seeds (`scene_seed_block`)"""
HIGH_SEED_BLOCKS = 2_000_000
"""where the scene-seed blocks of run seeds ≥ 10 start (above every evaluation suite's seeds)"""


def scene_seed_block(seed: int) -> int:
    """The first family-sampler seed of a run's own scenes (its rounds' novel scenes and replay parents, at offsets
    below 100,000): seed 0 from 0 (a plain `coda run`), seeds 1-9 in blocks of 60,000 from 460,000 (below the
    evaluation suites' seeds, as every grid before v3.1 ran them), seeds 10 and up in blocks of 100,000 from
    `HIGH_SEED_BLOCKS` (above them: `sim.suites.EVAL_SEED_END`)."""
    if seed not in RUN_SEEDS:
        raise ValueError(f"seed must be in 0..{RUN_SEEDS[-1]}, got {seed}")
    if seed < 10:
        return 400_000 + 60_000 * seed if seed else 0
    return HIGH_SEED_BLOCKS + 100_000 * (seed - 10)

ROUND_SEEDS = 10_000
"""family-sampler seeds per round in a run seed's block (`CoEvolution._scene_seed`: round r's novel scenes start at
offset 10,000 · (r + 1))"""


def max_rounds(seed: int) -> int:
    """The most rounds a run of `seed` can take before its rounds' scenes run into the next block (another seed's,
    or the evaluation suites' after seed 9): 45 for seed 0, 5 for seeds 1-9 (blocks of 60,000), 9 for seeds 10 and up
    (blocks of 100,000)."""
    scene_seed_block(seed)  # the seed's check
    width = 460_000 if seed == 0 else 60_000 if seed < 10 else 100_000
    return width // ROUND_SEEDS - 1


def check_rounds(rounds: int, seeds) -> None:
    """ValueError naming the first seed whose block cannot hold `rounds` rounds of scenes."""
    for seed in seeds:
        if rounds > max_rounds(seed):
            raise ValueError(f"rounds must be at most {max_rounds(seed)} for seed {seed} (each round draws its scenes "
                             f"from {ROUND_SEEDS:,} sampler seeds of the seed's own block), got {rounds}")


BEFORE_FIELD = {"round_rollouts": "sample", "round_demos": "round", "external_dt": False, "external_proxies": 0}
"""fields whose default changed after they were added → what a preset recorded without them did"""

PRESETS = {
    # 40 accepted environments per family and round: the round benchmark's D_t size (quick run protocol v2)
    "quick": Preset(name="quick", seed_scenes_per_family=40, targeted_per_family=40, interim_eval_per_suite=4),
    # issue 20's grid (docs/PROTOCOL.md): the quick round from a competent base on the narrow seed distribution
    # (experiments/base_v1), 3 rounds, 32 paired evaluation scenes per (family, suite): 512 OOD episodes per cell
    "protocol": Preset(name="protocol", demos_per_family=250, sft_updates=6000, base_distribution="seed",
                       rounds=3, seed_scenes_per_family=40, targeted_per_family=40, eval_per_suite=32,
                       interim_eval_per_suite=4),
    "tiny": Preset(name="tiny", families=("pick_place",), demos_per_family=12, sft_updates=60, rounds=1,
                   seed_scenes_per_family=3, targeted_per_family=3, rollouts_per_scene=1, max_diagnoses=3,
                   critic_updates=10, policy_updates=10, eval_per_suite=2),
    "paper": Preset(name="paper", demos_per_family=1280, sft_updates=20_000, rounds=5, seed_scenes_per_family=64,
                    targeted_per_family=64, rollouts_per_scene=8, max_diagnoses=32, critic_updates=2000,
                    policy_updates=2000, eval_per_suite=100, lora=True),
}


def get_preset(name: str, **overrides) -> Preset:
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; valid presets: {', '.join(PRESETS)}")
    return replace(PRESETS[name], **overrides) if overrides else PRESETS[name]


EXPERIMENT_OVERRIDES = {
    "tiny": {"rounds": 2},
    "quick": {"rounds": 3, "eval_per_suite": 8},
    "protocol": {},
    "paper": {},
}
"""Budget of an experiment cell (`coda experiment`) relative to the run preset. quick: 3 rounds (generation memory
only matters from the third round on) and 8 evaluation scenes per (family, suite) (128 OOD episodes per
evaluation); the base SFT is trained once per seed and shared. With the quick round's 40 accepted environments per
family (protocol v2 of the quick run) a round costs ≈ 3-4 min on 2 cores, a cell ≈ 11-13 min."""


def experiment_preset(name: str, **overrides) -> Preset:
    """The preset of an experiment cell: the run preset, its EXPERIMENT_OVERRIDES, then `overrides`."""
    return get_preset(name, **{**EXPERIMENT_OVERRIDES.get(name, {}), **overrides})


SETTABLE = ("intervention_variants", "intervention", "execution_variants", "demos_per_family", "sft_updates", "base_distribution", "robot",
            "base_eval_in", "round_base_demos", "rounds", "seed_scenes_per_family", "targeted_per_family",
            "rollouts_per_scene", "max_diagnoses", "critic_updates", "policy_updates", "eval_per_suite", "interim_eval_per_suite", "eps_novel", "eps_replay", "lora",
            "round_update", "bc_balance", "share_round0", "targeted_operators", "targeted_batches", "novel_scenes", "mode_key", "round_rollouts", "round_demos", "external_start", "external_template", "external_gripper_rate", "external_probe_n", "external_eval_n",
            "external_eval_seeds", "external_proxies", "external_dt", "external_probe_all", "train_replicate",
            "external_takeover", "round_takeover")
"""the budget fields `--set` may change"""


def parse_overrides(items: list[str]) -> dict:
    """`--set` values like ["targeted_per_family=24", "lora=true,rounds=4"] -> typed Preset overrides."""
    types = {f.name: f.type for f in fields(Preset)}
    out: dict = {}
    for item in (part for text in items for part in text.split(",") if part.strip()):
        key, sep, value = (x.strip() for x in item.partition("="))
        if not sep or key not in SETTABLE:
            raise ValueError(f"--set expects KEY=VALUE with KEY one of {', '.join(SETTABLE)}; got {item!r}")
        kind = types[key]
        try:
            if kind == "bool":
                if value.lower() not in ("true", "false", "1", "0"):
                    raise ValueError
                out[key] = value.lower() in ("true", "1")
            elif kind == "str":
                out[key] = value
            else:
                out[key] = float(value) if kind == "float" else int(value)
        except ValueError:
            expected = {"bool": "true or false", "float": "a number"}.get(kind, "an integer")
            raise ValueError(f"--set {key}: expected {expected}, got {value!r}") from None
    return out


def cli_overrides(args) -> dict:
    """Preset overrides from the shared `coda run|experiment` flags --families, --rounds and --set."""
    out: dict = {}
    if args.families:
        out["families"] = tuple(f.strip() for f in args.families.split(","))
    if args.rounds is not None:
        out["rounds"] = args.rounds
    out.update(parse_overrides(args.set))
    target = getattr(args, "target", None)
    if target:
        out["external"] = target
    return out
