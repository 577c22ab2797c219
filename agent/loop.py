"""The orchestrated co-evolution loop (SPEC §5–8), entirely through MCP tool calls to the four servers.

    seed:   base policy by SFT on planner demos (or a shared base checkpoint); evaluation before
    round:  allocate → generate (novel / targeted + control / replay) → verify → record → rollouts →
            diagnose (≤ C failures per stratum) → cluster into modes → validate (targeted < control) →
            compile generation + training programs (Text2potential) → route and train (K_Q, K_π) →
            learning progress → evaluation
    end:    evaluation after, memory export, report

Baselines and ablations are the same loop with other switches (`agent.methods.Method`): where environments come
from, whether the critic, validation, potentials and memory are used, whether the policy is updated. Every method
gets the same number of accepted (verified) environments per round (`accepted_budget`).

The roles (engine, critic, compiler) run in this process with the chosen backend; everything they touch in the
simulator, verifier, memory and trainer goes through the hub. Each step is memoized in `RunState`, and memory
writes use deterministic ids, so `--resume` neither loses nor duplicates records.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from agent.hub import Hub, ToolError
from agent.methods import CODA, Method
from agent.presets import (
    EXECUTION_VARIANTS,
    RUN_SEEDS,
    Preset,
    check_rounds,
    external_tasks,
    scene_seed_block,
)
from agent.roles.engine import CONTROL_FACTOR, OfflineEngine, operators_for, program_of, recreating_operators
from agent.roles.factory import Roles
from agent.runstate import RunState
from servers.contract import MAX_BATCH, MAX_PAGE
from sim.constants import SCENE_FACTOR_OF, SUITES
from sim.spec import RobotStart

log = logging.getLogger(__name__)

WAIT_S = 45.0
MAX_DRAWS = 4
"""a round draws at most this many candidate environments per accepted one before it gives up"""
TOO_HARD_SCENES = 2
"""failing scenes per mode below the success band that join a round's BC data (`CoEvolution.execution_scenes`)"""
INTERVENTION_FACTORS = ("task", "layout", "attributes")
"""scene factors an intervention changes, one at a time"""
INTERVENTION_OPERATORS = {
    "resample": {f: operators_for(f, None) for f in INTERVENTION_FACTORS},
    "undo": {"task": ("familiar_task",), "layout": ("declutter",), "attributes": ("nominal",)},
    "familiar": {f: ("familiar",) for f in INTERVENTION_FACTORS},
}
"""`Preset.intervention` -> scene factor -> the variation operators an intervention's variants use (the
counterfactuals of `sim.engine.variations.UNDO` for "undo", the seed-distribution redraws of `FAMILIAR` for
"familiar")"""
EXTERNAL_PROBE_GROUP = 10
"""seed group of round 0's external probe (round r: this + r); the evaluations before and after use groups from 0"""
PROXY_TRIES = 3
"""seed scenes tried per external failure until its resembling scene verifies"""


def say(msg: str) -> None:
    print(f"[coda] {msg}", file=sys.stderr, flush=True)


def run_job(hub: Hub, tool: str, **args) -> object:
    """Start a trainer job, wait for it (its progress is shown) and return its result."""
    job_id = hub.call("trainer", tool, args).data["job_id"]
    while True:
        status = hub.call("trainer", "wait_job", {"job_id": job_id, "timeout_s": WAIT_S}).data
        if status["state"] in ("succeeded", "failed", "cancelled", "interrupted"):
            break
        if status.get("total"):
            say(f"  {tool}: {status['done']:.0f}/{status['total']:.0f} {status.get('message', '')}")
    if status["state"] != "succeeded":
        raise RuntimeError(f"trainer job {tool} {status['state']}: {status.get('error')}")
    return status["result"]


class CoEvolution:
    """One run of `method`. `base` = {"tag": checkpoint name in the trainer, "eval": its evaluation} starts from a
    shared base policy instead of training one; `memory_from` is the state.json of the run whose scenes and
    training programs a `generation="memory"` method reuses; `early_stop` ends the run when no mode is in band."""

    def __init__(self, hub: Hub, roles: Roles, run_dir: Path, preset: Preset, run_id: str, *,
                 method: Method = CODA, seed: int = 0, base: dict | None = None, memory_from: Path | None = None,
                 early_stop: bool = True, shared_round0: dict | None = None):
        if seed not in RUN_SEEDS:
            raise ValueError(f"seed must be in 0..{RUN_SEEDS[-1]} (scene seeds of runs must stay apart), got {seed}")
        check_rounds(preset.rounds, [seed])
        if method.generation == "memory" and memory_from is None:
            raise ValueError(f"method {method.name} reuses another run's memory: give memory_from")
        self.hub, self.roles, self.preset, self.run_id = hub, roles, preset, run_id
        roles.connect(hub)
        self.operators = OfflineEngine(hub=hub)
        """the sim's own variation operators, for interventions: a measurement, whoever writes the round's scenes"""
        self.method, self.seed, self.base, self.early_stop = method, seed, base, early_stop
        self.shared_round0 = shared_round0
        """{"train": round 1's training result in a shared run, "eval": its evaluation} (`agent.experiment.shared`):
        this run's round-1 update loads that checkpoint instead of training when its arguments are the same"""
        self.source = json.loads(Path(memory_from).read_text())["steps"] if memory_from else None
        self.run_dir = Path(run_dir)
        self.state = RunState(self.run_dir)
        self.state.set("preset", preset.to_dict())
        self.state.set("backend", roles.backend)
        self.state.set("method", method.to_dict())
        self.state.set("seed", seed)

    # --- tool plumbing --------------------------------------------------------------------------
    def call(self, server: str, tool: str, **args):
        return self.hub.call(server, tool, args).data

    def job(self, tool: str, **args) -> object:
        """Start a trainer job and wait for it (progress is shown); returns its result."""
        return run_job(self.hub, tool, **args)

    def save_ledger(self) -> None:
        self.state.set("tokens", self.roles.ledger.to_dict())

    # --- the run --------------------------------------------------------------------------------
    def run(self) -> dict:
        p, m = self.preset, self.method
        say(f"run {self.run_id}: method {m.name}, seed {self.seed}, preset {p.name}, families "
            f"{', '.join(p.families)}, backend {self.roles.backend}")
        t0 = time.perf_counter()
        self.start()
        for r in range(p.rounds if m.rounds else 0):
            self.round(r)
            if self.early_stop and m.critic and r > 0 and not self.state.result(f"r{r}.modes")["in_band"]:
                say("no mode left in the success band: stopping")
                break
        last = [k for k in self.state.data["order"] if k.endswith(".eval")] or ["eval.before"]
        # the last round's evaluation already measured the final policy (without rounds: the base policy) unless
        # it was an interim one (a round stopped early): then the final size, on the same scenes as eval.before
        final = self.state.result(last[-1])
        full = all(e["n"] >= p.eval_per_suite for e in final)
        self.state.step("eval.after", lambda: final if full else self.evaluate(n=p.eval_per_suite))
        if p.external:
            rounds = [k for k in self.state.data["order"] if k.startswith("r") and k.endswith(".train")]
            self.state.step("external.after", lambda: self.state.result("external.before") if not rounds
                            else self.external_eval(p.external_eval_n, p.external_eval_seeds))
        self.state.step("export", lambda: self.call("memory", "export_memory", directory="exports/memory"))
        self.finish(t0)
        return self.state.data

    def first_round(self) -> dict:
        """The base policy and round 1 only (no final evaluation, no export): a shared round 1 (`agent.experiment.
        shared`) that the cells of several methods start from."""
        say(f"run {self.run_id}: round 1 of method {self.method.name}, seed {self.seed}, preset {self.preset.name}")
        t0 = time.perf_counter()
        self.start()
        self.round(0)
        self.finish(t0)
        return self.state.data

    def finish(self, t0: float) -> None:
        self.state.set("wall_seconds", self.state.get("wall_seconds", 0.0) + time.perf_counter() - t0)
        self.state.set("mcp_seconds", self.state.get("mcp_seconds", 0.0) + self.hub.overhead_seconds())
        self.save_ledger()

    def start(self) -> None:
        """The base policy (trained, or the shared checkpoint loaded) and its evaluation before the rounds."""
        p = self.preset
        if self.base is not None:
            if not self.state.done("seed.sft"):
                say(f"base policy: shared checkpoint {self.base['tag']}")
            self.state.step("seed.sft", lambda: {"shared_base": self.base["tag"], **self.call(
                "trainer", "load_checkpoint", tag=self.base["tag"])})
            self.state.step("eval.before", lambda: self.base["eval"])
        else:
            self.state.step("seed.sft", lambda: self.job(
                "train_sft", families=list(p.families), demos_per_family=p.demos_per_family, updates=p.sft_updates,
                distribution=p.base_distribution, robot=p.robot))
            say("base policy trained (SFT on planner demonstrations)")
            self.state.step("eval.before", lambda: self.evaluate("mean"))
        if p.external:
            self.state.step("external.before", lambda: (self.base or {}).get("external") or self.external_eval(
                p.external_eval_n, p.external_eval_seeds, mode="mean"))

    def evaluate(self, mode: str | None = None, n: int | None = None) -> list[dict]:
        p = self.preset
        mode = mode or self.method.select
        res = self.job("evaluate", families=list(p.families), suites=list(SUITES), n=n or p.eval_per_suite, mode=mode)
        if p.base_distribution == "seed":  # the base's own seed distribution: is its competence kept?
            res += self.job("evaluate", families=list(p.families), suites=["seed"], n=n or p.base_eval_in, mode=mode)
        say("evaluation: " + ", ".join(f"{e['family']}/{e['suite']} {e['success_rate']:.2f}" for e in res))
        return res

    def external_eval(self, n: int, seeds: int, first_group: int = 0, evidence: bool = False,
                      mode: str | None = None) -> list[dict]:
        """The policy on the external target tasks (`Preset.external`; the trainer's evaluate_external)."""
        rows = self.job("evaluate_external", tasks=external_tasks(self.preset.external), n=n, seeds=seeds,
                        first_group=first_group, evidence=evidence, mode=mode or self.method.select)
        say("external: " + ", ".join(f"{e['suite']} {e['success_rate']:.2f}" for e in rows))
        return rows

    def external_targets(self, r: int) -> dict:
        """After round r's update (issue 22, the paper's external-benchmark runs): a probe of the external tasks;
        the critic diagnoses each failure (at most C per task) from its external evidence, and a verified scene of
        this simulator resembling it (`sim.engine.proxy`: a seed scene of the task's family with its task objects
        where the benchmark's were) becomes the diagnosis' scene. The modes they fall into then get the next
        round's generation units like any mode: variants of those scenes (or, for execution modes found by
        intervention, planner demos on them). A method without a critic (`Preset.external_probe_all`) only gets
        the scenes. Returns the probe's rates, the diagnoses and the scenes."""
        from sim.evidence.models import Evidence

        p, critic = self.preset, self.method.critic
        rows = self.external_eval(p.external_probe_n, 1, first_group=EXTERNAL_PROBE_GROUP + r, evidence=True)
        mode_scenes, out, scenes = self.state.get("mode_scenes", {}), [], []
        for t, row in enumerate(rows):
            for k, failure in enumerate(row.get("failures", [])[: p.external_proxies or p.max_diagnoses]):
                try:
                    d = self.roles.critic.diagnose(Evidence.model_validate(failure["evidence"])) if critic else None
                except Exception as exc:  # noqa: BLE001 - a role failure skips this episode, the round goes on
                    log.warning("critic failed on %s seed %s: %s", row["suite"], failure["seed"], exc)
                    continue
                scene_id = self._proxy_scene(r, row, failure, 100 * t + k)
                if scene_id is None:
                    continue
                scenes.append(scene_id)
                if d is None:  # a method without a critic (`Preset.external_probe_all`): the scene only
                    continue
                rec = self.call("memory", "record_diagnosis", diagnosis={
                    "id": f"d-ext-r{r}-{row['benchmark']}-{row['task']}-{failure['seed']}-{self.run_id}"[:128],
                    "scene_id": scene_id, "factor": d.factor, "phase": d.phase,
                    "cause": f"On {row['suite']}: {d.cause}"[:800], "round": r, "run_id": self.run_id,
                    "evidence": {"step_indices": d.evidence_steps, "state_facts": d.state_facts}},
                    cluster_by=self.preset.mode_key)
                mode_scenes.setdefault(rec["mode_id"], [])
                if scene_id not in mode_scenes[rec["mode_id"]]:
                    mode_scenes[rec["mode_id"]].append(scene_id)
                out.append({"suite": row["suite"], "seed": failure["seed"], "scene_id": scene_id,
                            "mode_id": rec["mode_id"], "factor": d.factor, "phase": d.phase, "cause": d.cause})
        self.state.set("mode_scenes", mode_scenes)
        self.save_ledger()
        say(f"  external probe: {len(scenes)} scenes resembling its failures" + (
            f", diagnosed into {len({d['mode_id'] for d in out})} modes" if critic else ""))
        keep = ("suite", "family", "n", "success_rate", "stderr", "phases")
        return {"suites": [{k: row[k] for k in keep if k in row} for row in rows], "diagnoses": out,
                "scenes": scenes}

    def _proxy_scene(self, r: int, row: dict, failure: dict, i: int) -> str | None:
        """A verified scene of this simulator resembling an external episode (the sim's proxy_scene on a seed scene
        of its family; up to PROXY_TRIES seed scenes), recorded in the memory; None when none verifies."""
        for j in range(PROXY_TRIES):
            spec = self.family_scene(row["family"], self._scene_seed(r, 90_000 + 10 * i + j))
            try:
                made = self.call("sim", "proxy_scene", spec=spec.model_dump(mode="json"), objects=failure["start"],
                                 source=row["suite"], seed=i, **self._proxy_start(failure),
                                 **({"template": row["template"]} if self.preset.external_template and row.get("template") else {}))
            except ToolError as exc:  # this seed scene does not fit (e.g. the template's slots); another may
                log.warning("no scene resembling %s seed %s from seed scene %d: %s", row["suite"], failure["seed"],
                            j, exc.message)
                continue
            scene = self._create(r, program_of(made, "external", parent=spec.spec_hash()), None)
            if scene["verified"]:
                return scene["scene_id"]
        return None

    def _proxy_start(self, failure: dict) -> dict:
        """The `start` argument of proxy_scene: the external episode's start of the hand, when the preset copies
        it (`Preset.external_start`) and it is one this simulator can start from (`sim.spec.RobotStart`)."""
        start = failure.get("start_robot")
        if start is not None and not self.preset.external_gripper_rate:
            start = {k: v for k, v in start.items() if k != "gripper_rate"}
        if not self.preset.external_start or start is None:
            return {}
        try:
            return {"start": RobotStart.model_validate(start).model_dump(mode="json")}
        except ValueError as exc:
            log.warning("external start %s not usable here (%s); the proxy scene starts at home", start, exc)
            return {}

    def accepted_budget(self, r: int) -> int:
        """Accepted (verified) environments of round r, the same for every method."""
        p = self.preset
        return (p.seed_scenes_per_family if r == 0 else p.targeted_per_family) * len(p.families)

    def round(self, r: int) -> None:
        p, st, m = self.preset, self.state, self.method
        say(f"round {r + 1}/{p.rounds} ({m.name})")
        alloc = st.step(f"r{r}.allocate", lambda: self.allocate(r))
        scenes = st.step(f"r{r}.generate", lambda: self.generate(r, alloc))
        ok = [s for s in scenes if s["verified"]]
        say(f"  generated {len(scenes)} scenes, {len(ok)} verified")
        rollouts = st.step(f"r{r}.rollouts", lambda: self.rollouts(r, ok))
        say(f"  {len(rollouts)} rollouts, success {_rate(rollouts):.2f}")
        interventions = st.step(f"r{r}.intervene", lambda: self.intervene(r, rollouts) if m.intervene else {})
        diags = st.step(f"r{r}.diagnose", lambda: self.diagnose(r, scenes, rollouts, interventions) if m.critic
                        else [])
        if m.critic:
            say(f"  {len(diags)} failures diagnosed into {len({d['mode_id'] for d in diags})} modes")
        verdicts = st.step(f"r{r}.validate", lambda: self.validate(r, scenes, rollouts))
        compiled = st.step(f"r{r}.compile", lambda: self.compile(r, verdicts, scenes, rollouts))
        st.step(f"r{r}.train", lambda: self.train(r, rollouts, compiled))
        st.step(f"r{r}.progress", lambda: self.progress(r, verdicts, scenes, rollouts, compiled))
        last = r == p.rounds - 1
        if p.external and (m.critic or p.external_probe_all) and not last:
            st.step(f"r{r}.external", lambda: self.external_targets(r))
        st.step(f"r{r}.modes", lambda: self.mode_summary(r))
        shared = st.result(f"r{r}.train").get("shared_round0")  # the shared round's policy: its evaluation
        st.step(f"r{r}.eval", lambda: self.shared_round0["eval"] if shared else self.evaluate(
            n=None if last else p.interim_eval_per_suite or None))
        self.save_ledger()

    # --- allocation and generation ----------------------------------------------------------------
    def allocate(self, r: int) -> dict:
        """Units per difficulty mode. With generation memory: UCB over every mode in memory (SPEC §5); without:
        the modes diagnosed in the previous round, evenly (the same novel share, no replay)."""
        p, m = self.preset, self.method
        if not m.guided:
            return {"budget": self.accepted_budget(r), "generation": m.generation}
        if m.gen_memory:
            return self.call("memory", "allocate_budget", budget=p.budget(), eps_novel=p.eps_novel,
                             eps_replay=p.eps_replay, band_low=p.band[0], band_high=p.band[1], round=r)
        modes = sorted({d["mode_id"] for d in self._diagnosed(r - 1)}) if r > 0 else []
        return self.call("memory", "allocate_evenly", budget=p.budget(), mode_ids=modes, eps_novel=p.eps_novel)

    def generate(self, r: int, alloc: dict) -> list[dict]:
        """Candidate environments of the method, created, verified and recorded until the round's accepted budget
        is reached (at most MAX_DRAWS candidates per accepted environment)."""
        stream = {"diagnosis": self._guided, "domain_rand": self._domain_rand, "uniform": self._uniform,
                  "success": self._success_guided, "memory": self._from_memory}[self.method.generation](r, alloc)
        want = self.accepted_budget(r)
        if self.method.generation == "memory":
            want = sum(1 for s in self.source.get(f"r{r}.generate", {}).get("result", []) if s["verified"])
        out, accepted = [], 0
        for program, mode_id in stream:
            if accepted >= want or len(out) >= MAX_DRAWS * max(want, 1):
                break
            out.append(self._create(r, program, mode_id))
            accepted += out[-1]["verified"]
        return out

    def _novel_seeds(self, r: int) -> Iterator[tuple[str, int]]:
        """(family, sampler seed) of round r's novel scenes, families in turn."""
        p = self.preset
        for i in range(100 * max(1, self.accepted_budget(r))):
            yield p.families[i % len(p.families)], self._scene_seed(r, i)

    def _novel(self, r: int) -> Iterator:
        for family, seed in self._novel_seeds(r):
            yield from ((pr, None) for pr in self.roles.engine.seed_programs(family, 1, start_seed=seed))

    def _scene_seed(self, r: int, i: int) -> int:
        """Family-sampler seed of the i-th novel scene of round r, in the run seed's block (`scene_seed_block`)."""
        return scene_seed_block(self.seed) + 10_000 * (r + 1) + i

    def _guided(self, r: int, alloc: dict) -> Iterator:
        """Novel seed programs, targeted + control batches per allocated mode, replay variants (SPEC §5). Units of
        modes without a parent scene go to novel environments; novel ones top the round up to its budget."""
        engine = self.roles.engine
        mode_scenes = self._mode_scenes(r)
        programs = []
        for mode_id, k in (alloc.get("per_mode", {}) if r > 0 else {}).items():
            parents = self._mode_parents(mode_id, mode_scenes, max(1, k // 2)) if k > 0 else []
            mode = self.call("memory", "get_mode", mode_id=mode_id) if parents else None
            if not parents or self._bc_only(mode):
                continue
            targeted, control = [], []
            for i, (parent, n) in enumerate(parents):  # variants spread over the mode's failing parents
                t, c = engine.batches(parent, mode["factor"], mode["phase"], n, keep=self._keep(mode),
                                      seed=1000 * r + 100_000 * self.seed + 7_919 * i, **self._variant_ops(mode))
                targeted, control = targeted + t, control + c
            for pair in zip(targeted, control, strict=False):  # interleaved: a cut keeps both batches
                programs += [(pr, mode_id) for pr in pair]
            programs += [(pr, mode_id) for pr in targeted[len(control):] + control[len(targeted):]]
        for j, (mode_id, k) in enumerate((alloc.get("replay_per_mode", {}) if r > 0 else {}).items()):
            parents = self._mode_parents(mode_id, mode_scenes, k) if k > 0 else []
            mode = self.call("memory", "get_mode", mode_id=mode_id) if parents else None
            if not parents or self._bc_only(mode):
                continue
            fresh = self._program_replay(r, j, mode_id, mode, k // 2) if self.method.gen_memory else []
            programs += [(pr, mode_id) for pr in fresh]
            left = k - len(fresh)
            parents = self._mode_parents(mode_id, mode_scenes, left) if left > 0 else []
            for i, (parent, n) in enumerate(parents):
                made = engine.variants(parent, self._replay_factor(mode), n,
                                       seed=7 * r + 1 + 100_000 * self.seed + 7_919 * i, batch="replay",
                                       **self._variant_ops(mode))
                programs += [(pr, mode_id) for pr in made]
        yield from programs
        yield from self._guided_novel(r)

    def _guided_novel(self, r: int) -> Iterator:
        """The novel environments of a guided round (`Preset.novel_scenes`): family seed scenes, or after the common
        first round the same scenes domain-randomized as the `domain_rand` baseline draws them, or one-factor
        variants of earlier accepted scenes as the `uniform` baseline draws them (batch "novel")."""
        if r > 0 and self.preset.novel_scenes == "domain_rand":
            yield from self._domain_rand(r, {}, batch="novel", stream=29)
        elif r > 0 and self.preset.novel_scenes == "uniform":
            yield from self._variants_of(r, self._accepted_before(r), "novel", stream=31)
        else:
            yield from self._novel(r)

    def _program_replay(self, r: int, j: int, mode_id: str, mode: dict, n: int) -> list:
        """Replay on new parents (generation memory, SPEC §6): the mode's latest stored generation program,
        its roles bound to the objects of fresh seed scenes of its family (`apply_generation_program`), so a
        remembered difficulty spreads beyond the scenes it was found in. At most n programs (batch "replay")."""
        from memory_store.schema import GenerationProgram

        if n <= 0:
            return []
        try:
            rows = self.call("memory", "get_generation_programs", mode_id=mode_id, limit=MAX_PAGE)
        except ToolError as exc:
            log.warning("could not retrieve generation programs of %s: %s", mode_id, exc.message)
            return []
        if not rows:
            return []
        program = GenerationProgram.model_validate(rows[-1])
        out: list = []
        for i in range(4 * n):
            if len(out) >= n:
                break
            spec = self.family_scene(program.family, self._scene_seed(r, 50_000 + 1_000 * j + i))
            made = self.roles.engine.apply_generation_program(program, spec, 1, seed=7_919 * r + 101 * j + i,
                                                              phase=mode["phase"])
            out += [pr.model_copy(update={"batch": "replay"}) for pr in made[:1]]
        return out

    def _bc_only(self, mode: dict) -> bool:
        """An execution mode found by intervention (no factor change helped) gets no scene variants unless
        `Preset.execution_variants` names some: its units go to novel environments and its failing scenes to the
        round's BC data (`execution_scenes`)."""
        return (self.method.intervene and mode["factor"] == "execution"
                and EXECUTION_VARIANTS[self.preset.execution_variants] is None)

    def _replay_factor(self, mode: dict) -> str:
        """The scene factor a mode's replay variants of its own scenes vary: its own, or with
        `Preset.targeted_batches = "keep"` the other one (`CONTROL_FACTOR`), as its targeted batches do."""
        factor = SCENE_FACTOR_OF[mode["factor"]]
        return CONTROL_FACTOR[factor] if self._keep(mode) else factor

    def _keep(self, mode: dict) -> bool:
        """Targeted variants keep the mode's factor and vary another (`Preset.targeted_batches`); an execution
        mode's variants (`Preset.execution_variants`) are near-duplicates either way."""
        return self.preset.targeted_batches == "keep" and mode["factor"] != "execution"

    def _variant_ops(self, mode: dict) -> dict:
        """The operators of a mode's targeted and replay variants: an execution mode's under
        `Preset.execution_variants`; none when they keep the mode's factor (`_keep`: the other factor is
        resampled); another mode's under `Preset.targeted_operators` ("recreate": only those that recreate the
        difficulty); else the engine's own choice."""
        if self._keep(mode):
            return {}
        if mode["factor"] == "execution":
            ops = EXECUTION_VARIANTS[self.preset.execution_variants]
        elif self.preset.targeted_operators == "recreate":
            ops = recreating_operators(SCENE_FACTOR_OF[mode["factor"]], mode["phase"])
        else:
            ops = None
        return {"operators": ops} if ops else {}

    def execution_scenes(self, r: int) -> list[str]:
        """Failing scenes cloned from the planner in round r's update, as D_t does for the round's own
        environments: those of the execution modes allocated in round r (with interventions), and those of modes
        measured below the success band (too hard for variants to teach anything: their units went elsewhere),
        at most TOO_HARD_SCENES per mode."""
        if r == 0 or not self.method.critic:
            return []
        alloc, mode_scenes = self.state.result(f"r{r}.allocate"), self._mode_scenes(r)
        out: list[str] = []
        if self.method.intervene:
            for mode_id, k in {**alloc.get("per_mode", {}), **alloc.get("replay_per_mode", {})}.items():
                if k > 0 and self._bc_only(self.call("memory", "get_mode", mode_id=mode_id)):
                    out += (mode_scenes.get(mode_id) or [])[:k]
        for mode in self.call("memory", "list_modes", limit=MAX_PAGE):
            if mode["status"] != "refuted" and mode["hardness"] is not None and mode["hardness"] < self.preset.band[0]:
                out += (mode_scenes.get(mode["id"]) or [])[:TOO_HARD_SCENES]
        return list(dict.fromkeys(out))

    def _mode_scenes(self, r: int) -> dict[str, list[str]]:
        """Scenes where each mode was diagnosed: all rounds with generation memory, else the previous round only."""
        if self.method.gen_memory:
            return self.state.get("mode_scenes", {})
        out: dict[str, list[str]] = {}
        for d in self._diagnosed(r - 1) if r > 0 else []:
            out.setdefault(d["mode_id"], [])
            if d["scene_id"] not in out[d["mode_id"]]:
                out[d["mode_id"]].append(d["scene_id"])
        return out

    def _diagnosed(self, r: int) -> list[dict]:
        """Round r's diagnoses: of its own rollouts, then of the external probe's failures (with external targets)."""
        ext = self.state.result(f"r{r}.external") if f"r{r}.external" in self.state.data["order"] else None
        return [*self.state.result(f"r{r}.diagnose"), *((ext or {}).get("diagnoses", []))]

    def _domain_rand(self, r: int, alloc: dict, batch: str = "domain_rand", stream: int = 17) -> Iterator:
        """Fresh family scenes, randomized over the hand-specified wide ranges of `agent.methods.DR_RANGES` (`stream`
        keys the draws' generator apart from other users of the same scenes)."""
        from agent.methods import DR_RANGES

        rng = np.random.default_rng([self.seed, r, stream])
        for family, seed in self._novel_seeds(r):
            spec = self.family_scene(family, seed)
            yield self.roles.engine.domain_randomized(spec, rng, DR_RANGES, batch=batch), None

    def family_scene(self, family: str, seed: int):
        """The seed scene of a family (stored by the sim server, which samples it)."""

        scene_id = self.call("sim", "sample_scene", family=family, seed=seed)["scene_id"]
        return self._spec(scene_id)

    def _uniform(self, r: int, alloc: dict) -> Iterator:
        """Round 0: the seed scenes (as every method); later: variants of earlier accepted scenes, one factor drawn
        uniformly per variant."""
        if r == 0:
            yield from self._novel(r)
            return
        yield from self._variants_of(r, self._accepted_before(r), "uniform")

    def _success_guided(self, r: int, alloc: dict) -> Iterator:
        """Variants of the earlier scenes whose measured success rate lies inside the band (uniform factor); novel
        scenes when no scene is in the band."""
        if r == 0:
            yield from self._novel(r)
            return
        lo, hi = self.preset.band
        rates = defaultdict(list)
        for k in range(r):
            for x in self.state.result(f"r{k}.rollouts"):
                rates[x["scene_id"]].append(x["success"])
        pool = [sid for sid in self._accepted_before(r) if rates.get(sid) and lo <= _mean(rates[sid]) <= hi]
        self.state.set(f"r{r}.success_pool", pool)
        if pool:
            yield from self._variants_of(r, pool, "success")
        yield from self._novel(r)

    def _variants_of(self, r: int, scene_ids: list[str], batch: str, stream: int = 29) -> Iterator:
        from agent.methods import uniform_variant
        from sim.spec import SceneSpec

        rng = np.random.default_rng([self.seed, r, stream])
        specs: dict[str, SceneSpec] = {}
        for _ in range(MAX_DRAWS * self.accepted_budget(r)):
            sid = scene_ids[int(rng.integers(len(scene_ids)))]
            if sid not in specs:
                specs[sid] = self._spec(sid)
            made = uniform_variant(self.roles.engine, specs[sid], rng, batch=batch)
            if made is not None:
                yield made, None

    def _accepted_before(self, r: int) -> list[str]:
        return list(dict.fromkeys(s["scene_id"] for k in range(r) for s in self.state.result(f"r{k}.generate")
                                  if s["verified"]))

    def _from_memory(self, r: int, alloc: dict) -> Iterator:
        """Another run's accepted scenes of round r, recreated from their programs (no new generation)."""
        from agent.roles.engine import EngineProgram

        for s in self.source.get(f"r{r}.generate", {}).get("result", []):
            if s["verified"] and s.get("program"):
                seed = s.get("seed", 0)
                yield EngineProgram(source=s["program"], seed=seed, family=s["family"], batch=s["batch"],
                                    parent=s.get("parent")), s["mode_id"]

    def _mode_parents(self, mode_id: str, mode_scenes: dict, n: int) -> list[tuple]:
        """(parent spec, variants wanted) for `n` variants of a mode spread evenly over its failing scenes (the
        first scenes get the remainder; at most `n` parents)."""

        ids = (mode_scenes.get(mode_id) or [])[: max(n, 0)]
        if not ids:
            return []
        share, extra = divmod(n, len(ids))
        return [(self._spec(sid), share + (i < extra))
                for i, sid in enumerate(ids)]

    def _create(self, r: int, program, mode_id: str | None) -> dict:
        family, batch = program.family, program.batch
        try:
            info = self.call("sim", "create_scene", source=program.source, seed=program.seed)
        except ToolError as exc:
            rec_id = f"failed-r{r}-{hashlib.sha256(program.source.encode()).hexdigest()[:16]}"
            self.call("memory", "record_scene", scene={
                "id": rec_id, "family": family, "program": program.source, "verified": False, "round": r,
                "run_id": self.run_id, "violations": [{"check": "executes", "message": exc.message[:500]}],
                "batch": _memory_batch(batch), "mode_id": mode_id})
            return {"scene_id": rec_id, "family": family, "batch": batch, "mode_id": mode_id, "verified": False,
                    "factor": program.factor, "operator": program.operator}
        scene_id = info["scene_id"]
        # an environment to train on never uses the OOD suites' held-out items; a scene resembling an external
        # benchmark's episode copies that task by design (`Preset.external_template`: robosuite Lift is `pp_lift`)
        report = self.call("verifier", "verify_scene", scene_id=scene_id, train_side=batch != "external")
        violations = [{"check": c["name"], "message": c["message"][:500], "objects": c.get("objects", [])}
                      for c in report["checks"] if not c["passed"]]
        self.call("memory", "record_scene", scene={
            "id": scene_id, "family": family, "program": program.source, "spec_hash": scene_id,
            "verified": report["passed"], "violations": violations, "batch": _memory_batch(batch), "mode_id": mode_id,
            "round": r, "run_id": self.run_id})
        return {"scene_id": scene_id, "family": family, "batch": batch, "mode_id": mode_id,
                "verified": report["passed"], "program": program.source, "seed": program.seed,
                "parent": program.parent, "factor": program.factor, "operator": program.operator,
                **({"binding": program.binding} if program.binding else {})}

    # --- rollouts and diagnosis -----------------------------------------------------------------
    def rollouts(self, r: int, scenes: list[dict]) -> list[dict]:
        if not scenes:
            return []
        ids = list(dict.fromkeys(s["scene_id"] for s in scenes))
        # the value critic exists after the first training (the base SFT policy has none)
        how = self._rollout_args()
        if self.method.select == "critic" and r > 0:  # Q-softmax over sampled chunks: N rollouts differ
            how = {"mode": "critic", "per_scene": self.preset.rollouts_per_scene}
        result = self.job("collect_rollouts", scene_ids=ids, seed=r + 1000 * self.seed, tag=f"r{r}", **how)
        info = {s["scene_id"]: s for s in scenes}
        # collect_rollouts' rows as they are; the memory derives the policy id and the return from them
        records = [{**x, "round": r, "run_id": self.run_id} for x in result]
        for i in range(0, len(records), 200):
            self.call("memory", "record_rollouts", rollouts=records[i : i + 200])
        by_scene = defaultdict(list)
        for x in result:
            by_scene[x["scene_id"]].append(x["success"])
        for sid, outcomes in by_scene.items():
            s = info[sid]
            self.call("memory", "record_scene", scene={
                "id": sid, "family": s["family"], "program": s.get("program", ""), "spec_hash": sid,
                "verified": True, "batch": _memory_batch(s["batch"]), "mode_id": s["mode_id"], "round": r,
                "run_id": self.run_id,
                "success_rate": sum(outcomes) / len(outcomes), "n_rollouts": len(outcomes)})
        return [{**x, "family": info[x["scene_id"]]["family"], "batch": info[x["scene_id"]]["batch"],
                 "mode_id": info[x["scene_id"]]["mode_id"]} for x in result]

    def to_diagnose(self, rollouts: list[dict]) -> list[dict]:
        """The failed rollouts the critic examines: at most C per (family, batch, mode) stratum, strata in order."""
        strata = defaultdict(list)
        for x in rollouts:
            if not x["success"]:
                strata[(x["family"], x["batch"], x["mode_id"] or "")].append(x)
        return [x for key in sorted(strata) for x in strata[key][: self.preset.max_diagnoses]]

    def _rollout_args(self) -> dict:
        """How this method's round rollouts act (`Preset.round_rollout_args`; `Method.samples_rollouts`)."""
        return self.preset.round_rollout_args(sampled=self.method.samples_rollouts)

    def intervene(self, r: int, rollouts: list[dict], draw: int = 0) -> dict[str, dict]:
        """Attribution by intervention (issue 19): for each scene with a failure to diagnose, the current policy
        (mean action, so the outcome is the scene's, not the sampling's) rolls out once in the unchanged scene (not
        under mean round rollouts: the failure is that run) and, where it fails there too, once in each of
        `preset.intervention_variants` verified variants per scene factor (task, layout, attributes; the engine's
        own operators). A scene the deterministic policy solves failed by sampling noise: no factor is attributed
        there (`Intervention.attributed`), so no variants are made for it (29% of the intervened scenes of a
        probe24-size cell). `preset.intervention` says what the variants change (`INTERVENTION_OPERATORS`); `draw`
        > 0 draws other variants (a retest, `coda bench attribution`). Returns scene id -> `Intervention` fields. The variant scenes are stored for the trainer but are not the round's
        environments (no memory records, no training)."""

        n = self.preset.intervention_variants
        scene_ids = list(dict.fromkeys(x["scene_id"] for x in self.to_diagnose(rollouts)))
        if n <= 0 or not scene_ids:
            return {}
        # with mean round rollouts the failure to diagnose already is the mean action's run at this seed
        deterministic = self._rollout_args()["mode"] == "mean"
        success = dict.fromkeys(scene_ids, False) if deterministic else self._deterministic_success(r, scene_ids)
        plan: dict[str, dict[str, list[str]]] = {}
        absent: dict[str, list[str]] = {}
        undo = self.preset.intervention == "undo"
        for i, sid in enumerate(scene_ids):
            plan[sid], absent[sid] = {}, []
            if success[sid]:
                continue
            spec = self._spec(sid)
            for j, factor in enumerate(INTERVENTION_FACTORS):
                made = self.operators.variants(spec, factor, n, seed=7_919 * r + 101 * i + j + 1_000_003 * self.seed
                                               + 15_485_863 * draw, batch="intervention",
                                               operators=INTERVENTION_OPERATORS[self.preset.intervention][factor])
                if undo and not made:  # the counterfactual did not apply: no suspect there
                    absent[sid].append(factor)
                ids = [v for v in map(self._verified_scene, made) if v and v != sid]
                plan[sid][factor] = list(dict.fromkeys(ids))  # a deterministic counterfactual is made once
        variants = list(dict.fromkeys(v for p in plan.values() for ids in p.values() for v in ids))
        success.update(self._deterministic_success(r, variants))
        out = {sid: {"original_success": success[sid],
                     "variants": {f: [success[v] for v in ids] for f, ids in plan[sid].items()},
                     **({"absent": absent[sid]} if absent[sid] else {})} for sid in scene_ids}
        flips = sum(1 for v in out.values() for ok in v["variants"].values() if any(ok))
        solved = sum(success[sid] for sid in scene_ids)
        say(f"  intervened on {len(scene_ids)} failing scenes ({solved} solved by the deterministic policy; "
            f"{len(variants)} variants, {flips} factor flips)")
        return out

    def _deterministic_success(self, r: int, scene_ids: list[str]) -> dict[str, bool]:
        """One mean-action rollout per scene (the interventions' seed): scene id -> success."""
        success: dict[str, bool] = {}
        for k in range(0, len(scene_ids), MAX_BATCH):
            got = self.job("collect_rollouts", scene_ids=scene_ids[k : k + MAX_BATCH], per_scene=1, mode="mean",
                           seed=r + 1000 * self.seed, tag=f"i{r}")
            success.update({x["scene_id"]: bool(x["success"]) for x in got})
        return success

    def _verified_scene(self, program) -> str | None:
        """Create a scene from an engine program and verify it: its id, or None when it fails."""
        try:
            info = self.call("sim", "create_scene", source=program.source, seed=program.seed)
        except ToolError:
            return None
        return info["scene_id"] if self.call("verifier", "verify_scene", scene_id=info["scene_id"],
                                             train_side=True)["passed"] else None

    def diagnose(self, r: int, scenes: list[dict], rollouts: list[dict],
                 interventions: dict[str, dict] | None = None) -> list[dict]:
        from agent.roles.critic import Intervention
        from sim.evidence.models import Evidence

        interventions = interventions or {}
        out, mode_scenes = [], self.state.get("mode_scenes", {})
        for x in self.to_diagnose(rollouts):
            ev = self.call("trainer", "get_rollout_evidence", rollout_id=x["rollout_id"])
            evidence = Evidence.model_validate(ev["evidence"])
            inter = interventions.get(x["scene_id"])
            try:
                d = self.roles.critic.diagnose(evidence, Intervention.model_validate(inter) if inter else None)
            except Exception as exc:  # noqa: BLE001 - a role failure skips this rollout, the round goes on
                log.warning("critic failed on %s: %s", x["rollout_id"], exc)
                continue
            rec = self.call("memory", "record_diagnosis", diagnosis={
                "id": f"d-{x['rollout_id']}", "scene_id": x["scene_id"], "rollout_ids": [x["rollout_id"]],
                "factor": d.factor, "phase": d.phase, "cause": d.cause, "round": r, "run_id": self.run_id,
                "evidence": {"step_indices": d.evidence_steps, "state_facts": d.state_facts}},
                cluster_by=self.preset.mode_key)
            mode_scenes.setdefault(rec["mode_id"], [])
            if x["scene_id"] not in mode_scenes[rec["mode_id"]]:
                mode_scenes[rec["mode_id"]].append(x["scene_id"])
            out.append({"rollout_id": x["rollout_id"], "scene_id": x["scene_id"], "mode_id": rec["mode_id"],
                        "factor": d.factor, "phase": d.phase, "cause": d.cause,
                        "target_mode": x["mode_id"] if x["batch"] == "targeted" else None,
                        "intervened": inter is not None})
        self.state.set("mode_scenes", mode_scenes)
        self.save_ledger()
        return out

    # --- validation, compilation, training ------------------------------------------------------
    def validate(self, r: int, scenes: list[dict], rollouts: list[dict]) -> dict:
        """Targeted-vs-control test per mode (validated when targeted success < control success). Without
        refinement every mode with targeted rollouts counts as validated."""
        if not self.method.critic:
            return {}
        by_mode = defaultdict(lambda: {"targeted": [], "control": []})
        for x in rollouts:
            if x["mode_id"] and x["batch"] in ("targeted", "control"):
                by_mode[x["mode_id"]][x["batch"]].append(x["success"])
        verdicts = {}
        for mode_id, b in by_mode.items():
            if not b["targeted"] or (self.method.refine and not b["control"]):
                continue
            t, c = _mean(b["targeted"]), _mean(b["control"])
            if self.method.refine:
                status, reason = ("validated" if t < c else "refuted"), f"targeted success {t:.2f} vs control {c:.2f}"
            else:
                status, reason = "validated", f"not tested (no refinement); targeted success {t:.2f}"
            self.call("memory", "set_mode_status", mode_id=mode_id, status=status, round=r, reason=reason)
            self.call("memory", "update_hardness", mode_id=mode_id, successes=sum(b["targeted"]),
                      n=len(b["targeted"]), round=r, band_low=self.preset.band[0], band_high=self.preset.band[1])
            verdicts[mode_id] = {"status": status, "targeted": t, "control": c, "tested": self.method.refine}
        return verdicts

    def compile(self, r: int, verdicts: dict, scenes: list[dict], rollouts: list[dict]) -> dict:
        """Generation program and training program (Text2potential) per validated mode."""
        from agent.roles.compiler import CompileRequest, PotentialReport

        m, out = self.method, {}
        for mode_id, v in verdicts.items():
            if v["status"] != "validated":
                continue
            mode = self.call("memory", "get_mode", mode_id=mode_id)
            targeted = [s for s in scenes if s["mode_id"] == mode_id and s["batch"] == "targeted" and s["verified"]]
            if not targeted:
                continue
            parent_id = self._mode_scenes(r).get(mode_id, [targeted[0]["scene_id"]])[0]
            self.call("memory", "put_generation_program", program={
                "id": f"g-{mode_id}-r{r}", "mode_id": mode_id, "parent_scene_id": parent_id,
                "factor": SCENE_FACTOR_OF[mode["factor"]], "variants": [s["scene_id"] for s in targeted],
                "family": targeted[0]["family"], "success_on_variants": v["targeted"], "round": r,
                "run_id": self.run_id, "roles": ["target"]})
            scene = targeted[0]
            spec = self._spec(scene["scene_id"])
            if m.potential == "task":  # the task description alone, not the diagnosis
                diag = _Diag("task", "other", f"the task: {spec.task.instruction}")
            else:
                diag = _Diag(mode["factor"], mode["phase"], mode["description"])
            traces = [x["rollout_id"] for x in rollouts if x["scene_id"] == scene["scene_id"]][:3]
            checks: list[dict] = []

            def checker(source: str, scene_id=scene["scene_id"], traces=traces, checks=checks):
                """Φ checked by the verifier server on this scene's rollouts and its planner demonstration."""
                if checks and not m.refine:
                    raise RuntimeError("no refinement: the compiler's first program did not pass its checks")
                checks.append(self.call("verifier", "check_potential", source=source, scene_id=scene_id,
                                        trace_ids=traces))
                return PotentialReport.model_validate({**checks[-1]["report"], "ok": checks[-1]["ok"],
                                                       "errors": checks[-1]["errors"]})

            examples = self._training_examples(mode_id) if m.train_memory else []
            request = CompileRequest(diagnosis=diag, spec=spec, success_rate=v["targeted"], checker=checker,
                                     has_demo=True, examples=examples)
            try:
                prog = self.roles.compiler.compile(request)
            except Exception as exc:  # noqa: BLE001 - no training program this round; the mode stays validated
                log.warning("compiler failed for %s: %s", mode_id, exc)
                continue
            check = {"passed": bool(checks and checks[-1]["ok"])}
            tp_id = f"t-{mode_id}-r{r}"
            self.call("memory", "put_training_program", program={
                "id": tp_id, "mode_id": mode_id, "phase": prog.phase, "subgoals": prog.subgoals,
                "potential_code": prog.source, "learning_tool": prog.learning_tool, "round": r,
                "run_id": self.run_id, "evidence": {"check_passed": check.get("passed"), "targeted": v["targeted"],
                                                    "source": m.potential}})
            out[mode_id] = {"training_program_id": tp_id, "source": prog.source, "passed": check.get("passed", False),
                            "learning_tool": prog.learning_tool, "parent": scene.get("parent"),
                            "scene_ids": [s["scene_id"] for s in targeted], "family": scene["family"],
                            "scene_id": scene["scene_id"]}
        self.save_ledger()
        return out

    def _training_examples(self, mode_id: str) -> list:
        from memory_store.schema import TrainingProgram

        try:
            rows = self.call("memory", "get_training_programs", mode_id=mode_id, limit=3)
        except ToolError as exc:
            log.warning("could not retrieve training programs of %s: %s", mode_id, exc.message)
            return []
        return [TrainingProgram.model_validate(x) for x in rows or []]

    def train(self, r: int, rollouts: list[dict], compiled: dict) -> dict:
        """K_Q critic + K_π policy updates on this round's rollouts with BC on planner demos of seed scenes of every
        family and, for modes whose training program routes to BC (SPEC §7) and execution modes, on their scenes;
        with `method.round_data` "dt", on D_t too — planner demonstrations on every accepted environment of the
        round and the policy's own successes (SPEC §5) — and with "dt_only" on D_t alone. Shaped by this round's
        potentials (method.potential) and, with training memory, by the stored potentials of earlier rounds;
        earlier rollouts in scenes that have a potential are trained on again where the round update reads
        potentials (branch, critic). Under "bc" nothing reads them, and re-training on old rollouts would only add
        earlier successes to the BC data (grid v1 seed 1: −8.4 ± 2.0 OOD, −4.7 in-distribution), so it does not."""
        p, m = self.preset, self.method
        if not rollouts:
            return {"skipped": "no rollouts"}
        ids = [x["rollout_id"] for x in rollouts]
        fresh = self._potentials(compiled)
        reused: dict[str, str] = {}
        if m.train_memory and m.potential != "none" and p.round_update != "bc":
            library, parent = self._library(r), self._parents(r)
            earlier = [x for k in range(r) for x in self.state.result(f"r{k}.rollouts")]
            for x in rollouts + earlier:
                sid = x["scene_id"]
                key = sid if sid in library else parent.get(sid)
                if sid not in fresh and key in library:
                    reused[sid] = library[key]
            ids += [x["rollout_id"] for x in earlier if x["scene_id"] in fresh or x["scene_id"] in reused]
        # the chunk critic is read only by critic action selection and the critic round update (branch AWR uses
        # Monte-Carlo advantages and values cut branches by Φ itself): no critic updates where nothing uses them
        critic_updates = p.critic_updates if m.select == "critic" or p.round_update == "critic" else 0
        args = dict(rollout_ids=list(dict.fromkeys(ids)), critic_updates=critic_updates,
                    policy_updates=p.policy_updates if m.update_policy else 0, lora=p.lora)
        if p.round_update != "branch":
            args["collect"] = p.round_update
        if p.bc_balance:
            args["balance_families"] = True
        if p.train_replicate and r > 0:  # round 1 stays the common round
            args["replicate"] = p.train_replicate
        if m.round_data != "dt_only":  # seed-scene demos of every family (the base-demo mix)
            args.update(demo_families=list(p.families), demos_per_family=p.round_mix_demos())
        if m.round_data in ("dt", "dt_failed", "dt_only"):  # D_t: the planner on accepted environments, + own successes
            planned = self._dt_scenes(rollouts)
            if p.round_demos == "accumulated":  # D_1 ∪ … ∪ D_t, this round's first
                planned += [sid for k in range(r - 1, -1, -1) for sid in self._dt_scenes(self.state.result(f"r{k}.rollouts"))]
            args["bc_successes"] = bool(args["policy_updates"])
        else:  # the scenes of modes routed to BC
            planned = self._bc_scenes(compiled)
        proxies = self.external_dt_scenes(r)
        if p.external_takeover and proxies and args["policy_updates"]:  # corrective windows where the policy fails
            args["takeover_scene_ids"] = proxies[:MAX_BATCH]
        if p.round_takeover and args["policy_updates"]:  # ... and where it failed in the round's own rollouts
            args["takeover_failed"] = True
        planned += proxies + self.execution_scenes(r)  # execution modes: BC on their scenes, never scene variants
        bc_scenes = list(dict.fromkeys(planned))[: 4 * MAX_BATCH] if args["policy_updates"] else []
        if bc_scenes:
            args["demo_scene_ids"] = bc_scenes
        args["potential_programs"] = {**reused, **fresh}
        digest = hashlib.sha256(json.dumps(args, sort_keys=True).encode()).hexdigest()[:16]
        shared = (self.shared_round0 or {}).get("train") if r == 0 else None
        if shared and shared.get("args_digest") == digest:  # the same update, already made once for this seed
            self.call("trainer", "load_checkpoint", tag=shared["checkpoint"])
            say(f"  round-1 update shared: checkpoint {shared['checkpoint']} of the shared round")
            return {**shared, "shared_round0": True}
        if shared:
            say("  round-1 training arguments differ from the shared round's: training here")
        info = self.job("start_training", **args)
        if info.get("potential_failures"):  # a mode's potential that does not fit one of its scenes: unshaped there
            say(f"  {len(info['potential_failures'])} potential program(s) failed on their scene; those rollouts "
                "trained unshaped")
        return {**info, "rollouts_used": len(args["rollout_ids"]), "fresh_potentials": len(fresh),
                "reused_potentials": len(reused), "policy_updates": args["policy_updates"],
                "critic_updates": critic_updates,
                "bc_scenes": len(bc_scenes), "external_dt_scenes": len(proxies), "args_digest": digest,
                "takeover_scenes": len(args.get("takeover_scene_ids", []))}

    def external_dt_scenes(self, r: int) -> list[str]:
        """The scenes resembling external failures that join round r's D_t (`Preset.external_dt`): those of every
        probe before round r, newest first."""
        if not (self.preset.external_dt and self.preset.external):
            return []
        probes = [self.state.result(f"r{k}.external") for k in range(r - 1, -1, -1) if self.state.done(f"r{k}.external")]
        return list(dict.fromkeys(sid for probe in probes for sid in probe.get("scenes")  # before "scenes": diagnoses'
                                  or [d["scene_id"] for d in probe.get("diagnoses", [])]))

    def _dt_scenes(self, rollouts: list[dict]) -> list[str]:
        """The scenes of a round's D_t: every accepted environment with rollouts, or (`dt_failed`) those where
        every rollout failed."""
        solved = {x["scene_id"] for x in rollouts if x["success"]} if self.method.round_data == "dt_failed" else set()
        return [x["scene_id"] for x in rollouts if x["scene_id"] not in solved]

    def _bc_scenes(self, compiled: dict) -> list[str]:
        """Targeted scene ids of this round's modes compiled to BC (at most MAX_BATCH, in mode order): the trainer
        clones the planner's demos on them. Empty without the critic (nothing is compiled then)."""
        ids = [sid for c in compiled.values() if c["learning_tool"] == "bc" for sid in c["scene_ids"]]
        return list(dict.fromkeys(ids))[:MAX_BATCH]

    def _potentials(self, compiled: dict) -> dict[str, str]:
        """scene id -> potential source for this round's scenes of modes compiled to shaped AWR, its object names
        bound to each scene's objects of the same roles (`rebind_potential`; a scene where that fails goes
        unshaped)."""
        if self.method.potential == "none":
            return {}
        from agent.roles.compiler import rebind_potential

        out: dict[str, str] = {}
        for c in compiled.values():
            if c["learning_tool"] == "awr_shaped" and c["passed"]:
                on = c.get("scene_id") or c["scene_ids"][0]  # the scene it was compiled and checked on
                spec = self._spec(on)
                for sid in c["scene_ids"]:  # a mode's variants spread over parents with other objects: bound by role
                    source = c["source"] if sid == on else rebind_potential(c["source"], spec, self._spec(sid))
                    if source is not None:
                        out[sid] = source
        return out

    def _spec(self, scene_id: str):
        """A stored scene's spec (the sim server's `get_scene`)."""
        from sim.spec import SceneSpec

        return SceneSpec.model_validate(self.call("sim", "get_scene", scene_id=scene_id)["spec"])

    def _library(self, r: int) -> dict[str, str]:
        """Training memory: parent scene -> the latest checked shaped potential compiled on one of its variants in
        rounds before r. A potential names objects, and one-factor variants of a parent keep their names."""
        lib: dict[str, str] = {}
        for k in range(r):
            for c in self.state.result(f"r{k}.compile").values():
                if c["learning_tool"] == "awr_shaped" and c["passed"] and c.get("parent"):
                    lib[c["parent"]] = c["source"]
        return lib

    def _parents(self, r: int) -> dict[str, str | None]:
        return {s["scene_id"]: s.get("parent") for k in range(r + 1) for s in self.state.result(f"r{k}.generate")}

    def progress(self, r: int, verdicts: dict, scenes: list[dict], rollouts: list[dict], compiled: dict) -> dict:
        """Learning progress per mode: success on its targeted scenes before vs after this round's training."""
        out = {}
        for mode_id in verdicts:
            ids = [s["scene_id"] for s in scenes if s["mode_id"] == mode_id and s["batch"] == "targeted"
                   and s["verified"]]
            before = [x["success"] for x in rollouts if x["scene_id"] in ids]
            if not ids or not before:
                continue
            after = self.job("collect_rollouts", scene_ids=ids, seed=r + 1000 * self.seed, tag=f"p{r}",
                             **self._rollout_args())
            b, a = _mean(before), _rate(after)
            tp = compiled.get(mode_id, {}).get("training_program_id")
            self.call("memory", "update_learning_progress", mode_id=mode_id, before=b, after=a, round=r,
                      training_program_id=tp, updates=self.preset.policy_updates)
            out[mode_id] = {"before": b, "after": a}
        return out

    def mode_summary(self, r: int) -> dict:
        modes = self.call("memory", "list_modes", limit=200)
        return {"modes": modes, "in_band": sum(1 for m in modes if m["in_band"]),
                "validated": sum(1 for m in modes if m["status"] == "validated"),
                "refuted": sum(1 for m in modes if m["status"] == "refuted")}


class _Diag:
    """The mode's diagnosis as the compiler reads it (factor, phase, cause)."""

    def __init__(self, factor: str, phase: str, cause: str):
        self.factor, self.phase, self.cause = factor, phase, cause
        self.evidence_steps, self.state_facts = [], []


def _memory_batch(batch: str) -> str:
    """The memory's batch vocabulary: the baselines' own environments are recorded as novel ones."""
    return batch if batch in ("seed", "targeted", "control", "novel", "replay") else "novel"


def _mean(xs: Iterable) -> float:
    xs = list(xs)
    return sum(xs) / len(xs) if xs else 0.0


def _rate(rollouts: list[dict]) -> float:
    return _mean(x["success"] for x in rollouts)
