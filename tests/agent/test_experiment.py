"""Experiment harness: method switches change what the loop does, cells are saved and skipped on resume, tables.

The loop tests run the real sim and memory servers in process with a scripted verifier and trainer (deterministic
successes: layout variants fail, attribute and task variants succeed, seed scenes by a hash) and scripted critic
and compiler, so each method runs a few rounds in seconds. The slow test runs `coda experiment` for real.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from agent.experiment import run_experiment, write_tables
from agent.experiment.common import cell_name, write_json
from agent.experiment.metrics import (
    coverage_entropy,
    mean_se,
    summarize,
    targeting_precision,
    updates_to_threshold,
)
from agent.experiment.runner import preset_changes
from agent.experiment.tables import build_tables
from agent.hub import Hub, ServerSpec
from agent.llm import TokenLedger
from agent.loop import CoEvolution
from agent.methods import DR_RANGES, METHODS, get_method
from agent.presets import get_preset
from agent.roles.critic import CriticDiagnosis
from agent.roles.engine import OfflineEngine
from agent.roles.factory import Roles

REPO = Path(__file__).resolve().parents[2]
PRESET = get_preset("tiny", rounds=2, rollouts_per_scene=2, seed_scenes_per_family=3, targeted_per_family=4,
                     eval_per_suite=1)
POTENTIAL = "def potential(s):\n    return 0.0\n"


# --- scripted servers and roles ----------------------------------------------------------------------------------


class InProcess(ServerSpec):
    """A server object connected in process (mcp.Client accepts MCPServer instances)."""

    def __init__(self, name: str, server):
        super().__init__(name=name)
        self.server = server

    def target(self):
        return self.server


def fake_verifier():
    from servers.common import READ_ONLY, new_server, tool

    mcp = new_server("coda-verifier", "scripted")

    @tool(mcp, READ_ONLY)
    def verify_scene(scene_id: str, train_side: bool = False) -> dict:
        return {"passed": True, "checks": []}

    @tool(mcp, READ_ONLY)
    def check_potential(source: str, scene_id: str, trace_ids: list[str] = []) -> dict:  # noqa: B006
        return {"ok": True, "errors": [], "report": {"subgoals": ["reach"], "learning_tool": "awr_shaped"}}

    return mcp


class FakeTrainer:
    """Trainer tools with scripted outcomes; every call is kept in `calls` as (tool, args)."""

    def __init__(self, run_dir: Path):
        from sim.scene_store import SceneStore

        self.store, self.calls, self.step, self.run_dir = SceneStore(run_dir), [], 0, run_dir

    def success(self, scene_id: str, i: int) -> bool:
        varied = self.store.spec(scene_id).meta.get("varied")
        if varied == "layout":
            return False
        if varied in ("attributes", "task"):
            return True
        return int(hashlib.sha256(f"{scene_id}{i}".encode()).hexdigest(), 16) % 2 == 0

    def server(self):
        from servers.common import READ_ONLY, WRITES, new_server, tool
        from servers.jobs import JobManager, register_job_tools
        from sim.evidence.models import Evidence, TaskFacts

        mcp = new_server("coda-trainer", "scripted")
        jobs = JobManager(self.run_dir / "jobs" / "fake-trainer")
        register_job_tools(mcp, jobs)

        def started(kind, fn):
            return {"job_id": jobs.start(lambda job: fn(), kind=kind), "kind": kind}

        @tool(mcp, WRITES)
        def load_checkpoint(tag: str) -> dict:
            self.calls.append(("load_checkpoint", {"tag": tag}))
            return {"checkpoints": [tag], "current_step": 0, "has_critic": False}

        @tool(mcp, WRITES)
        def collect_rollouts(scene_ids: list[str], per_scene: int = 1, mode: str = "sample", seed: int = 0,
                             tag: str = "r") -> dict:
            self.calls.append(("collect_rollouts", {"scene_ids": scene_ids, "per_scene": per_scene, "mode": mode,
                                                    "tag": tag}))
            out = [{"rollout_id": f"{tag}-{self.step}-{seed}-{i:04d}-{sid[:8]}", "scene_id": sid,
                    "success": self.success(sid, i), "steps": 10}
                   for i, sid in enumerate(s for s in scene_ids for _ in range(per_scene))]
            return started("rollouts", lambda: out)

        @tool(mcp, READ_ONLY)
        def get_rollout_evidence(rollout_id: str) -> dict:
            ev = Evidence(rollout_id=rollout_id, steps=10, success=False, task=TaskFacts(
                family="pick_place", instruction="put the mug in the bowl", template="t", template_seen=True,
                relations=["inside"], relations_seen=True, goals=["inside(mug, bowl)"]))
            return {"rollout_id": rollout_id, "evidence": ev.model_dump(mode="json")}

        @tool(mcp, WRITES)
        def start_training(rollout_ids: list[str], potential_programs: dict[str, str] = {},  # noqa: B006
                           demo_families: list[str] = [], demos_per_family: int = 0,  # noqa: B006
                           demo_scene_ids: list[str] = [],  # noqa: B006
                           critic_updates: int = 0, policy_updates: int = 0, lora: bool = False,
                           bc_successes: bool = False, collect: str = "branch",
                           balance_families: bool = False, replicate: int = 0,
                           takeover_failed: bool = False) -> dict:
            self.calls.append(("start_training", {"rollout_ids": rollout_ids, "potentials": potential_programs,
                                                  "replicate": replicate, "takeover_failed": takeover_failed,
                                                  "collect": collect,
                                                  "policy_updates": policy_updates, "critic_updates": critic_updates,
                                                  "demo_families": demo_families,
                                                  "demo_scene_ids": demo_scene_ids,
                                                  "bc_successes": bc_successes,
                                                  "balance_families": balance_families}))
            self.step += policy_updates + critic_updates
            return started("train", lambda: {"updates": policy_updates + critic_updates,
                                             "shaped_rollouts": len(potential_programs),
                                             "scene_demos": len(demo_scene_ids)})

        @tool(mcp, READ_ONLY)
        def evaluate(families: list[str], suites: list[str], n: int = 1, mode: str = "mean") -> dict:
            self.calls.append(("evaluate", {"mode": mode}))
            res = [{"family": f, "suite": s, "n": n, "success_rate": 0.5, "stderr": 0.1, "mean_steps": 10}
                   for f in families for s in suites]
            return started("evaluate", lambda: res)

        return mcp

    def of(self, tool: str) -> list[dict]:
        return [a for t, a in self.calls if t == tool]


class ScriptedCritic:
    def __init__(self, factor: str = "spatial", phases: tuple[str, ...] = ("grasp",)):
        self.factor, self.phases, self.interventions = factor, phases, []

    def diagnose(self, evidence, intervention=None):
        self.interventions.append(intervention)  # phases in turn: one failure's phase, then the next one's
        return CriticDiagnosis(factor=self.factor, phase=self.phases[len(self.interventions) % len(self.phases)],
                               cause="a crate stands right next to the mug on its grasp side")


class ScriptedCompiler:
    def __init__(self, learning_tool: str = "awr_shaped"):
        self.requests = []
        self.learning_tool = learning_tool

    def compile(self, request):
        self.requests.append(request)
        request.checker(POTENTIAL)
        return SimpleNamespace(source=POTENTIAL, phase=request.diagnosis.phase, subgoals=["reach"],
                               learning_tool=self.learning_tool)


BASE_EVAL = [{"family": "pick_place", "suite": s, "n": 1, "success_rate": 0.25, "stderr": 0.1, "mean_steps": 10}
             for s in ("in", "instances", "layouts", "tasks", "categories")]


def run_method(tmp_path: Path, method: str, preset=PRESET, seed: int = 0, memory_from: Path | None = None,
               learning_tool: str = "awr_shaped", critic_factor: str = "spatial", shared_round0: dict | None = None,
               name: str | None = None, critic_phases: tuple[str, ...] = ("grasp",)):
    from memory_store.embed import HashingEmbedder
    from servers.memory import build_server as memory_server
    from servers.sim import build_server as sim_server

    run_dir = tmp_path / (name or "-".join([method] + [x for x in (learning_tool, critic_factor)
                                                       if x not in ("awr_shaped", "spatial")]))
    run_dir.mkdir(parents=True, exist_ok=True)
    trainer, compiler = FakeTrainer(run_dir), ScriptedCompiler(learning_tool)
    specs = [InProcess("sim", sim_server(run_dir)), InProcess("verifier", fake_verifier()),
             InProcess("memory", memory_server(run_dir, embedder=HashingEmbedder())),
             InProcess("trainer", trainer.server())]
    critic = ScriptedCritic(critic_factor, critic_phases)
    roles = Roles(OfflineEngine(), critic, compiler, TokenLedger(), "offline")
    with Hub(specs) as hub:
        loop = CoEvolution(hub, roles, run_dir, preset, method, method=get_method(method), seed=seed,
                           base={"tag": "base", "eval": BASE_EVAL}, memory_from=memory_from, early_stop=False,
                           shared_round0=shared_round0)
        state = loop.run()
    return SimpleNamespace(state=state, steps=state["steps"], trainer=trainer, compiler=compiler, run_dir=run_dir,
                           critic=critic)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("methods")
    names = ("sft", "domain_rand", "uniform", "success_guided", "no_memory", "coda", "sparse", "potential_from_task",
             "no_refine", "frozen_critic_select", "evidence_critic")
    return {m: run_method(tmp, m) for m in names}


def batches(run, r: int) -> dict[str, int]:
    out: dict[str, int] = {}
    for s in run.steps[f"r{r}.generate"]["result"]:
        if s["verified"]:
            out[s["batch"]] = out.get(s["batch"], 0) + 1
    return out


# --- the methods change what happens -----------------------------------------------------------------------------


def test_methods_are_distinct_switch_sets():
    switches = {m: tuple(v for k, v in METHODS[m].to_dict().items() if k not in ("name", "summary")) for m in METHODS}
    assert len(set(switches.values())) == len(switches), "two methods with the same switches"
    with pytest.raises(ValueError, match="unknown method"):
        get_method("nope")


def test_every_generating_method_gets_the_same_accepted_budget(runs):
    for name, run in runs.items():
        if name == "sft":
            continue
        accepted = [sum(batches(run, r).values()) for r in range(PRESET.rounds)]
        assert accepted == [3, 4], (name, accepted)


def test_sft_has_no_rounds_and_reuses_the_base_evaluation(runs):
    run = runs["sft"]
    assert not [k for k in run.steps if k.startswith("r")]
    assert run.steps["eval.after"]["result"] == BASE_EVAL
    assert run.trainer.of("load_checkpoint") == [{"tag": "base"}]
    assert not run.trainer.of("start_training") and not run.trainer.of("evaluate")


def test_blind_baselines_generate_their_own_way_without_critic_or_potentials(runs):
    assert batches(runs["domain_rand"], 0) == {"domain_rand": 3} and batches(runs["domain_rand"], 1) == {"domain_rand": 4}
    assert batches(runs["uniform"], 0) == {"seed": 3} and batches(runs["uniform"], 1) == {"uniform": 4}
    pool = runs["success_guided"].state["r1.success_pool"]
    assert pool, "no seed scene landed in the success band"
    assert batches(runs["success_guided"], 1) == {"success": 4}
    for name in ("domain_rand", "uniform", "success_guided"):
        run = runs[name]
        assert all(not run.steps[f"r{r}.diagnose"]["result"] for r in range(2)), name
        assert all(not t["potentials"] for t in run.trainer.of("start_training")), name
        assert not run.compiler.requests


def test_success_guided_varies_only_scenes_inside_the_band(runs):
    run = runs["success_guided"]
    rates: dict[str, list] = {}
    for x in run.steps["r0.rollouts"]["result"]:
        rates.setdefault(x["scene_id"], []).append(x["success"])
    assert all(0.1 <= sum(rates[s]) / len(rates[s]) <= 0.9 for s in run.state["r1.success_pool"])
    parents = {s["parent"] for s in run.steps["r1.generate"]["result"]}
    assert parents <= set(run.state["r1.success_pool"])


def test_domain_randomization_draws_from_the_wide_ranges(runs):
    from sim.spec import SceneSpec

    run = runs["domain_rand"]
    frictions = []
    for s in run.steps["r1.generate"]["result"]:
        spec = SceneSpec.model_validate_json((run.run_dir / "scenes" / f"{s['scene_id']}.json").read_text())
        frictions += [a.friction for a in spec.attributes.objects]
    lo, hi = DR_RANGES["friction"]
    assert all(lo <= f <= hi for f in frictions) and max(frictions) - min(frictions) > 0.3


def test_coda_targets_modes_validates_and_shapes_training(runs):
    run = runs["coda"]
    b = batches(run, 1)
    assert b.get("targeted", 0) >= 1 and b.get("control", 0) >= 1
    verdicts = run.steps["r1.validate"]["result"]
    assert verdicts and all(v["status"] == "validated" for v in verdicts.values())  # layout fails, attributes pass
    trains = run.trainer.of("start_training")
    assert not trains[0]["potentials"] and trains[1]["potentials"], "round 2 must be shaped by Text2potential"


def round_scene_ids(run, r: int) -> list[str]:
    return list(dict.fromkeys(x["scene_id"] for x in run.steps[f"r{r}.rollouts"]["result"]))


def buffer_scene_ids(run, r: int) -> list[str]:
    """The scenes of the accumulated buffer of round r (the default `round_demos`): round r's, then each earlier
    round's, newest first."""
    return list(dict.fromkeys(sid for k in range(r, -1, -1) for sid in round_scene_ids(run, k)))


def planned_beyond(run, planned: list[str], expected: list[str]) -> list[str]:
    """`planned` starts with `expected`; what follows are failing scenes of modes below the success band
    (`CoEvolution.execution_scenes`), at most TOO_HARD_SCENES of each mode's."""
    from agent.loop import TOO_HARD_SCENES

    assert planned[: len(expected)] == expected
    extra = planned[len(expected):]
    mode_of = {sid: m for m, sids in run.state.get("mode_scenes", {}).items() for sid in sids[:TOO_HARD_SCENES]}
    assert all(sid in mode_of for sid in extra), "only too-hard modes' scenes are added"
    return extra


def test_with_dt_clones_planner_demos_on_every_accepted_environment(runs, tmp_path):
    """D_t (issue 19, `with_dt`): each round's update clones the planner on every accepted (rolled-out) environment
    of the round and the policy's own successes, added to the seed-scene family demos. By default (protocol v3 of
    the round decision experiment) every method with policy updates clones the planner on the round's failed
    environments (`dt_failed`), `no_dt` on none of them, and a frozen policy on nothing."""
    run = run_method(tmp_path, "with_dt")
    trains = run.trainer.of("start_training")
    assert len(trains) == 2
    for r, t in enumerate(trains):
        accepted = [s["scene_id"] for s in run.steps[f"r{r}.generate"]["result"] if s["verified"]]
        planned_beyond(run, t["demo_scene_ids"], buffer_scene_ids(run, r))
        assert set(accepted) <= set(t["demo_scene_ids"])
        assert t["bc_successes"] and t["demo_families"] == ["pick_place"]
    assert run.steps["r1.train"]["result"]["bc_scenes"] == len(trains[1]["demo_scene_ids"])
    no_dt = run_method(tmp_path, "no_dt")
    assert not any(t["bc_successes"] for t in no_dt.trainer.of("start_training"))
    assert not any(set(round_scene_ids(no_dt, r)) & set(t.get("demo_scene_ids") or [])
                   for r, t in enumerate(no_dt.trainer.of("start_training")))
    for name, other in runs.items():
        trains = other.trainer.of("start_training")
        if name == "sft":
            assert not trains
            continue
        assert len(trains) == 2, name
        if name == "frozen_critic_select":
            assert all(not t["demo_scene_ids"] and t["policy_updates"] == 0 and not t["bc_successes"] for t in trains)
            continue
        for r, t in enumerate(trains):  # dt_failed, for every method alike
            rolled = other.steps[f"r{r}.rollouts"]["result"]
            failed = {x["scene_id"] for x in rolled} - {x["scene_id"] for x in rolled if x["success"]}
            assert t["bc_successes"] and t["demo_families"] == ["pick_place"], name
            assert failed <= set(t.get("demo_scene_ids") or []), name


def test_modes_routed_to_bc_clone_planner_demos_of_their_targeted_scenes(runs, tmp_path):
    """A training program with learning tool BC makes the next training clone the planner on the mode's targeted
    scenes (the family demos stay); modes routed to shaped AWR add none; without the critic or without policy
    updates nothing changes. (On the base round data, `no_dt`: D_t would add the round's failed scenes.)"""
    run = run_method(tmp_path, "no_dt", learning_tool="bc")
    compiled = run.steps["r1.compile"]["result"]
    assert compiled and all(c["learning_tool"] == "bc" for c in compiled.values())
    targeted = [sid for c in compiled.values() for sid in c["scene_ids"]]
    trains = run.trainer.of("start_training")
    assert not trains[0]["demo_scene_ids"], "the seed round compiles nothing"
    planned_beyond(run, trains[1]["demo_scene_ids"], list(dict.fromkeys(targeted)))
    assert trains[1]["demo_families"] == ["pick_place"] and not trains[1]["potentials"]
    assert run.steps["r1.train"]["result"]["bc_scenes"] == len(trains[1]["demo_scene_ids"])
    assert all(not t["bc_successes"] for t in trains)
    shaped = run_method(tmp_path, "no_dt")
    for t in shaped.trainer.of("start_training"):  # shaped-AWR modes add none (too-hard modes may)
        assert t["demo_families"] == ["pick_place"]
        planned_beyond(shaped, t["demo_scene_ids"], [])
    for name in ("domain_rand", "uniform", "success_guided", "frozen_critic_select"):  # D_t only: no modes
        for r, t in enumerate(runs[name].trainer.of("start_training")):
            assert set(t["demo_scene_ids"]) <= set(buffer_scene_ids(runs[name], r)), name


def test_sparse_ablation_differs_from_coda_only_in_shaping(runs):
    sparse, coda = runs["sparse"], runs["coda"]
    assert batches(sparse, 1) == batches(coda, 1)
    assert sparse.steps["r1.compile"]["result"], "sparse still compiles (routing), it only drops the potentials"
    assert all(not t["potentials"] for t in sparse.trainer.of("start_training"))


def test_potential_from_task_compiles_from_the_instruction(runs):
    req = runs["potential_from_task"].compiler.requests
    assert req and all(r.diagnosis.factor == "task" and "the task:" in r.diagnosis.cause for r in req)
    assert all(r.diagnosis.factor == "spatial" for r in runs["coda"].compiler.requests)


def test_no_refine_skips_the_control_test(runs):
    verdicts = runs["no_refine"].steps["r1.validate"]["result"]
    assert verdicts and all(v["status"] == "validated" and not v["tested"] for v in verdicts.values())
    assert all(v["tested"] for v in runs["coda"].steps["r1.validate"]["result"].values())


def test_frozen_policy_trains_only_the_critic_and_selects_with_it(runs):
    run = runs["frozen_critic_select"]
    assert all(t["policy_updates"] == 0 for t in run.trainer.of("start_training"))
    assert {e["mode"] for e in run.trainer.of("evaluate")} == {"critic"}
    modes = [c["mode"] for c in run.trainer.of("collect_rollouts") if c["tag"].startswith("r")]
    assert modes == ["sample", "critic"]  # no critic before the first training
    summary = summarize(run.state, method="frozen_critic_select", seed=0, backbone="transformer")
    assert summary["curve"][-1]["policy_updates"] == 0


def test_memory_switches_change_allocation_and_training(tmp_path, runs):
    preset = get_preset("tiny", rounds=3, rollouts_per_scene=2, seed_scenes_per_family=3, targeted_per_family=4,
                        eval_per_suite=1, round_update="branch")
    coda, nomem = run_method(tmp_path, "coda", preset), run_method(tmp_path, "no_memory", preset)
    assert coda.steps["r2.allocate"]["result"]["visits_recorded"] is True  # UCB over the memory's modes
    assert nomem.steps["r2.allocate"]["result"]["visits_recorded"] is False  # last round's diagnoses only
    assert coda.steps["r2.train"]["result"]["reused_potentials"] > 0
    assert coda.steps["r2.train"]["result"]["rollouts_used"] > len(coda.steps["r2.rollouts"]["result"])
    assert nomem.steps["r2.train"]["result"]["reused_potentials"] == 0
    assert nomem.steps["r2.train"]["result"]["rollouts_used"] == len(nomem.steps["r2.rollouts"]["result"])


def test_bc_round_update_trains_on_this_rounds_rollouts_only(tmp_path):
    """Under the `bc` round update nothing reads potentials, so earlier rounds' rollouts in scenes with a potential
    are not trained on again: CoDA then trains as its sparse ablation does."""
    preset = get_preset("tiny", rounds=3, rollouts_per_scene=2, seed_scenes_per_family=3, targeted_per_family=4,
                        eval_per_suite=1, round_update="bc")
    coda = run_method(tmp_path, "coda", preset)
    assert coda.steps["r0.compile"]["result"] or coda.steps["r1.compile"]["result"]  # potentials to reuse
    for r in (1, 2):
        t = coda.steps[f"r{r}.train"]["result"]
        assert t["reused_potentials"] == 0 and t["rollouts_used"] == len(coda.steps[f"r{r}.rollouts"]["result"])


def test_memory_transfer_replays_another_runs_scenes_without_generation(tmp_path, runs):
    source = runs["coda"].run_dir / "state.json"
    run = run_method(tmp_path, "memory_transfer", memory_from=source)
    for r in range(2):
        src = [s["scene_id"] for s in runs["coda"].steps[f"r{r}.generate"]["result"] if s["verified"]]
        assert [s["scene_id"] for s in run.steps[f"r{r}.generate"]["result"]] == src
    assert not run.compiler.requests and not run.steps["r1.diagnose"]["result"]


# --- metrics ---------------------------------------------------------------------------------------------------------


def test_metrics_of_a_run(runs):
    s = summarize(runs["coda"].state, method="coda", seed=0, backbone="transformer")
    assert s["metrics"]["accepted_per_round"] == [3, 4]
    assert [c["policy_updates"] for c in s["curve"]] == [0, PRESET.policy_updates, 2 * PRESET.policy_updates]
    assert s["metrics"]["targeting_precision"] == 1.0  # every targeted (layout) variant failed in its mode
    assert coverage_entropy([{"verified": True, "family": "a", "batch": "seed"}] * 4) == 0.0
    two = [{"verified": True, "family": "a", "batch": b} for b in ("x", "y")]
    assert coverage_entropy(two) == pytest.approx(1.0)
    assert targeting_precision([], []) is None


# --- cells, resume, tables -------------------------------------------------------------------------------------------


def fake_cell(out, method, seed, preset, base, *, backbone="transformer", memory_from=None, embedder=None):
    score = {"sft": 0.1, "uniform": 0.2, "coda": 0.4, "sparse": 0.3}.get(method, 0.15) + 0.01 * seed
    curve = [{"round": r, "policy_updates": 10 * r, "mean_ood": 0.1 + (score - 0.1) * r / 2, "in_dist": 0.5}
             for r in range(3)]
    result = {"cell": cell_name(method, seed, backbone), "method": method, "seed": seed, "backbone": backbone,
              "ood": {"pick_place": score, "stack": score / 2}, "ood_before": {"pick_place": 0.1, "stack": 0.05},
              "mean_ood": 0.75 * score, "mean_ood_before": 0.075, "in_dist": 0.5, "curve": curve,
              "metrics": {"verification_pass_rate": 1.0, "shaped_rollouts": 3 if method == "coda" else 0}}
    if method == "program_transfer":
        result = {"cell": cell_name(method, seed), "method": method, "seed": seed, "backbone": backbone,
                  "conditions": {"pick_place/within": {"lp": 0.2, "envs": 3, "programs": 1},
                                 "pick_place/cross": {"lp": 0.1, "envs": 3, "programs": 2},
                                 "pick_place/scratch": {"lp": 0.05, "envs": 3, "programs": 0}}}
    write_json(Path(out) / "cells" / f"{result['cell']}.json", result)
    fake_cell.calls.append(result["cell"])
    if result["cell"] == fake_cell.crash_at:
        raise KeyboardInterrupt
    return result


def test_cells_are_saved_as_they_finish_and_skipped_on_resume(tmp_path):
    out = tmp_path / "exp"
    fake_cell.calls, fake_cell.crash_at = [], None

    def crashing(*a, **k):
        if cell_name(a[1], a[2], k.get("backbone", "transformer")) == "coda-s0":
            raise KeyboardInterrupt  # interrupted before this cell finished
        return fake_cell(*a, **k)

    with pytest.raises(KeyboardInterrupt):
        run_experiment(out, ["sft", "uniform", "coda"], [0, 1], PRESET, cell_runner=crashing)
    assert sorted(p.stem for p in (out / "cells").glob("*.json")) == ["sft-s0", "uniform-s0"]
    with pytest.raises(FileExistsError):
        run_experiment(out, ["sft", "uniform", "coda"], [0, 1], PRESET, cell_runner=fake_cell)
    fake_cell.calls = []
    t = run_experiment(out, ["sft", "uniform", "coda"], [0, 1], PRESET, resume=True, cell_runner=fake_cell)
    assert fake_cell.calls == ["coda-s0", "sft-s1", "uniform-s1", "coda-s1"]
    assert t["pending_cells"] == []
    fake_cell.calls = []
    run_experiment(out, ["sft", "uniform", "coda"], [0, 1], PRESET, resume=True, cell_runner=fake_cell)
    assert fake_cell.calls == []
    log = (out / "progress.log").read_text()
    assert log.count("done  coda-s0") == 1 and "experiment finished" in log
    with pytest.raises(ValueError, match="another preset"):
        run_experiment(out, ["sft"], [0], get_preset("tiny"), resume=True, cell_runner=fake_cell)


def test_resume_refuses_a_folder_that_holds_no_experiment(tmp_path):
    """Session 37 (red team): --resume on a folder without experiment.json (an empty folder, a memory store) ran a
    whole new experiment into it; now it is refused and nothing is written."""
    for out in (tmp_path / "missing", tmp_path / "other"):
        if out.name == "other":
            out.mkdir()
            (out / "keep.txt").write_text("x")
        before = sorted(p.name for p in out.iterdir()) if out.exists() else None
        with pytest.raises(ValueError, match="holds no experiment to continue"):
            run_experiment(out, ["sft"], [0], PRESET, resume=True, cell_runner=fake_cell)
        assert (sorted(p.name for p in out.iterdir()) if out.exists() else None) == before


def test_resume_accepts_a_preset_field_added_later_at_its_default_only(tmp_path):
    """An experiment recorded before a Preset field existed resumes when the field is at its default (the
    behaviour from before it existed); a non-default value, or any changed budget, is refused by name."""
    out = tmp_path / "exp"
    fake_cell.calls, fake_cell.crash_at = [], None
    run_experiment(out, ["sft"], [0], PRESET, cell_runner=fake_cell)
    config = json.loads((out / "experiment.json").read_text())
    del config["preset"]["round_base_demos"]  # as recorded by code older than the field
    (out / "experiment.json").write_text(json.dumps(config))
    run_experiment(out, ["sft", "coda"], [0], PRESET, resume=True, cell_runner=fake_cell)
    assert "coda-s0" in fake_cell.calls
    with pytest.raises(ValueError, match=r"round_base_demos: -1 -> 30"):
        run_experiment(out, ["sft"], [0], replace(PRESET, round_base_demos=30), resume=True, cell_runner=fake_cell)
    assert preset_changes(PRESET.to_dict(), PRESET.to_dict()) == []


def test_a_failed_cell_is_logged_and_the_others_still_run(tmp_path):
    fake_cell.calls, fake_cell.crash_at = [], None

    def flaky(*a, **k):
        if a[1] == "uniform":
            raise RuntimeError("trainer job failed")
        return fake_cell(*a, **k)

    t = run_experiment(tmp_path / "exp", ["sft", "uniform", "coda"], [0], PRESET, cell_runner=flaky)
    assert t["failed_cells"] == ["uniform-s0"] and t["pending_cells"] == ["uniform-s0"]
    assert "FAILED uniform-s0" in (tmp_path / "exp" / "progress.log").read_text()


def test_tables_have_mean_and_standard_error_over_seeds(tmp_path):
    fake_cell.calls, fake_cell.crash_at = [], None
    out = tmp_path / "exp"
    run_experiment(out, ["sft", "uniform", "coda", "sparse"], [0, 1, 2], PRESET, transfer=True,
                   transfer_seeds=[0], cell_runner=fake_cell)
    t = json.loads((out / "results.json").read_text())
    m, se, n = t["ood"]["coda"]["pick_place"]
    assert n == 3 and m == pytest.approx(0.41) and se == pytest.approx(mean_se([0.40, 0.41, 0.42])[1])
    assert t["ood"]["coda"]["mean"][0] > t["ood"]["uniform"]["mean"][0] > t["ood"]["sft"]["mean"][0]
    md = (out / "results.md").read_text()
    assert "| coda | 41.0 ± 0.6 |" in md
    assert "potential_from_task" not in md  # neither planned nor run: no row, not a "pending" one
    assert (out / "curves.png").stat().st_size > 1000
    assert (out / "ood_by_method.png").stat().st_size > 1000
    t2p = t["text2potential"]
    assert t2p["coda"]["reached"] == 3 and t2p["sparse"]["reached"] == 3
    assert t2p["fewer_updates_with_potential"] is not None
    assert "measured" not in t2p and "Not a Text2potential measurement" not in md  # the fake cells name no update
    bc = build_tables([{**c, "preset": {"round_update": "bc"}} for c in
                       (json.loads(p.read_text()) for p in (out / "cells").glob("*.json"))])
    assert bc["text2potential"]["measured"] is False and "shape nothing" in bc["text2potential_md"] and "replay" in bc["text2potential_md"]
    cells = [json.loads(p.read_text()) for p in (out / "cells").glob("*.json")]
    planned = build_tables(cells, methods=["sft", "coda", "potential_from_task"])
    assert "| potential_from_task | pending | pending | pending | pending |" in planned["text2potential_md"]
    assert t["program_transfer"]["pick_place"]["cross_over_within"] == pytest.approx(0.5)
    assert "deepsets on transformer CoDA memory" in md
    # the tables can be rewritten from the cells alone
    (out / "results.md").unlink()
    write_tables(out)
    assert "| coda | 41.0 ± 0.6 |" in (out / "results.md").read_text()


def test_tables_leave_out_what_the_experiment_did_not_plan(tmp_path):
    fake_cell.calls, fake_cell.crash_at = [], None
    out = tmp_path / "exp"
    run_experiment(out, ["sft", "uniform"], [0], PRESET, cell_runner=fake_cell)
    md = (out / "results.md").read_text()
    assert "## Transfer" not in md and "## Text2potential" not in md and "potential_from_task" not in md
    assert "| uniform |" in md


def test_updates_to_threshold():
    cell = {"mean_ood_before": 0.10, "curve": [{"round": 0, "policy_updates": 0, "mean_ood": 0.10},
                                               {"round": 1, "policy_updates": 120, "mean_ood": 0.12},
                                               {"round": 2, "policy_updates": 240, "mean_ood": 0.16}]}
    assert updates_to_threshold(cell, 0.05) == (pytest.approx(0.15), 240)
    assert updates_to_threshold(cell, 0.10)[1] is None
    assert build_tables([])["ood"] == {}


# --- the real thing --------------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.integration
def test_coda_experiment_end_to_end_with_kill_and_resume(tmp_path):
    out = tmp_path / "exp"
    cmd = [sys.executable, "-m", "coda.cli", "experiment", "--methods", "sft,domain_rand,coda", "--seeds", "1",
           "--preset", "tiny", "--out", str(out), "--embedder", "hashing", "--json"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                            start_new_session=True)
    deadline = time.time() + 600
    while time.time() < deadline and not (out / "cells" / "domain_rand-s0.json").exists():
        assert proc.poll() is None, "experiment ended before it could be killed"
        time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    base_meta = (out / "base" / "transformer-s0" / "meta.json").stat().st_mtime
    done = subprocess.run(cmd + ["--resume"], cwd=REPO, capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert summary["pending"] == [] and summary["cells"] == 3
    assert (out / "base" / "transformer-s0" / "meta.json").stat().st_mtime == base_meta  # SFT trained once
    assert "resuming" not in done.stderr or True
    assert "cell 1/3" not in done.stderr and "cell 2/3" not in done.stderr  # finished cells skipped
    md = (out / "results.md").read_text()
    for m in ("sft", "domain_rand", "coda"):
        assert f"| {m} |" in md
    cells = {p.stem: json.loads(p.read_text()) for p in (out / "cells").glob("*.json")}
    assert cells["domain_rand-s0"]["batches"]["r1"] == {"domain_rand": 3}
    assert cells["coda-s0"]["metrics"]["accepted_per_round"] == [3, 3]


def test_seed_list_accepts_a_count_or_a_list():
    import argparse

    from coda.commands.experiment import seed_list

    assert seed_list("3") == [0, 1, 2]
    assert seed_list("1,2") == [1, 2]
    assert seed_list("2,") == [2]
    for bad in ("0", "-1", "1,1", "a", ",", "1,-2"):
        with pytest.raises(argparse.ArgumentTypeError):
            seed_list(bad)
    assert seed_list("9,14") == [9, 14] and seed_list("12") == list(range(12))
    for beyond in ("99,100", "101", "120,3"):  # a run refuses them: refused before any base policy is trained
        with pytest.raises(argparse.ArgumentTypeError, match="seeds must be in 0..99"):
            seed_list(beyond)


def test_run_seeds_have_scene_seed_blocks_apart_from_each_other_and_the_evaluation_suites():
    """Seeds 0-9 keep the scene seeds every earlier grid ran with; seeds from 10 on get blocks of 100,000 above the
    evaluation suites' seeds, apart from each other."""
    from agent.presets import RUN_SEEDS, scene_seed_block
    from sim.suites import EVAL_SEED_BASE, EVAL_SEED_END, suite_seed

    assert [scene_seed_block(s) for s in (0, 1, 9)] == [0, 460_000, 940_000]
    high = [scene_seed_block(s) for s in RUN_SEEDS if s >= 10]
    assert high[0] >= EVAL_SEED_END and all(b - a == 100_000 for a, b in zip(high, high[1:], strict=False))
    assert scene_seed_block(9) + 60_000 <= EVAL_SEED_BASE and high[-1] + 100_000 < 2**31
    assert suite_seed("seed", 10_000) < EVAL_SEED_END  # the last suite's seeds end below the high blocks
    with pytest.raises(ValueError, match="seed must be in 0..99"):
        scene_seed_block(100)


def test_seed_groups_share_one_directory(tmp_path):
    """Processes for different seeds on one --out (scripts/experiment_quick.sh SEED_GROUPS): the configuration
    keeps every seed and the transfer cells of the first group; all cells land in the same tables."""
    out = tmp_path / "exp"
    fake_cell.calls, fake_cell.crash_at = [], None
    run_experiment(out, ["sft", "coda"], [0], PRESET, cell_runner=fake_cell, transfer=True, transfer_seeds=[0])
    run_experiment(out, ["sft", "coda"], [1], PRESET, cell_runner=fake_cell, resume=True)
    config = json.loads((out / "experiment.json").read_text())
    assert config["seeds"] == [0, 1] and config["transfer"] is True and config["transfer_seeds"] == [0]
    assert {"sft-s1", "coda-s1", "coda-s0"} <= set(fake_cell.calls)
    t = write_tables(out)
    assert t["pending_cells"] == [] and len(t["cells"]) == len(list((out / "cells").glob("*.json")))


def test_set_overrides_are_typed_and_checked():
    from agent.presets import parse_overrides

    got = parse_overrides(["targeted_per_family=24,rollouts_per_scene=4", "lora=true", "eps_novel=0.2"])
    assert got == {"targeted_per_family": 24, "rollouts_per_scene": 4, "lora": True, "eps_novel": 0.2}
    preset = get_preset("quick", **got)
    assert preset.targeted_per_family == 24 and preset.budget() == 24 * len(preset.families)
    for bad, message in (["name=x", "KEY=VALUE"], ["rounds", "KEY=VALUE"], ["rounds=two", "an integer"],
                         ["lora=maybe", "true or false"]):
        with pytest.raises(ValueError, match=message):
            parse_overrides([bad])
    with pytest.raises(ValueError, match="rounds must be >= 0"):
        get_preset("quick", **parse_overrides(["rounds=-1"]))
    assert get_preset("quick", **parse_overrides(["base_distribution=seed"])).base_distribution == "seed"
    with pytest.raises(ValueError, match="base_distribution must be one of train, seed"):
        get_preset("quick", **parse_overrides(["base_distribution=narrow"]))
    assert get_preset("protocol").round_mix_demos() == 125 and get_preset("quick").round_mix_demos() == 30
    assert get_preset("protocol", **parse_overrides(["round_base_demos=30"])).round_mix_demos() == 30
    with pytest.raises(ValueError, match="round_base_demos must be >= 1"):
        get_preset("quick", round_base_demos=0)
    cli = subprocess.run([sys.executable, "-m", "coda.cli", "experiment", "--set", "rollouts_per_scene=x", "--out",
                          "unused"], capture_output=True, text=True)
    assert cli.returncode == 2 and "rollouts_per_scene: expected an integer" in cli.stderr


def test_settings_have_one_source(tmp_path):
    """The quick preset's budgets are the trainer tools' defaults; band, ε and the factor map come from sim.constants."""
    import asyncio

    from mcp import Client

    from servers.trainer import build_server
    from sim.constants import DIAGNOSIS_FACTORS, EPS_NOVEL, EPS_REPLAY, FACTORS, SCENE_FACTOR_OF, SUCCESS_BAND

    quick = get_preset("quick")
    assert (quick.band, quick.eps_novel, quick.eps_replay) == (SUCCESS_BAND, EPS_NOVEL, EPS_REPLAY)
    assert set(SCENE_FACTOR_OF) == set(DIAGNOSIS_FACTORS) and set(SCENE_FACTOR_OF.values()) <= set(FACTORS)

    async def defaults() -> dict:
        async with Client(build_server(tmp_path)) as c:
            return {t.name: {k: p.get("default") for k, p in t.input_schema["properties"].items()}
                    for t in (await c.list_tools()).tools}

    d = asyncio.run(defaults())
    assert (d["train_sft"]["demos_per_family"], d["train_sft"]["updates"]) == (quick.demos_per_family,
                                                                               quick.sft_updates)
    assert (d["start_training"]["critic_updates"], d["start_training"]["policy_updates"]) == (quick.critic_updates,
                                                                                            quick.policy_updates)
    assert d["collect_rollouts"]["per_scene"] == quick.rollouts_per_scene
    assert d["evaluate"]["n"] == quick.eval_per_suite


def test_interventions_rerun_the_policy_in_one_factor_variants_of_each_failing_scene(tmp_path, runs):
    """Before diagnosing, the loop runs the policy (mean action) once in verified variants of each failing scene
    that change one factor each — and, when the round's rollouts were sampled, once in the unchanged scene first
    (under mean round rollouts the failure already is that run); the critic gets exactly those outcomes; variants
    are no round environments (not in the round's scenes, not trained on)."""
    from agent.roles.critic import Intervention

    sampled = run_method(tmp_path, "coda", preset=replace(PRESET, round_rollouts="sample"), name="sampled")
    for run in (runs["coda"], sampled):
        inter = run.steps["r0.intervene"]["result"]
        failing = {x["scene_id"] for x in run.steps["r0.rollouts"]["result"] if not x["success"]}
        assert inter and set(inter) <= failing
        calls = [c for c in run.trainer.of("collect_rollouts") if c["tag"] == "i0"]
        assert calls and all(c["mode"] == "mean" and c["per_scene"] == 1 for c in calls)
        rolled = [sid for c in calls for sid in c["scene_ids"]]
        assert len(rolled) == len(set(rolled))
        accepted = {s["scene_id"] for s in run.steps["r0.generate"]["result"]}
        for outcome in inter.values():
            if outcome["original_success"]:  # failed by sampling noise: nothing to attribute, no variants made
                assert outcome["variants"] == {}
                continue
            assert set(outcome["variants"]) == {"task", "layout", "attributes"}
            assert all(1 <= len(v) <= 2 for v in outcome["variants"].values())  # preset.intervention_variants = 2
        assert any(not o["original_success"] for o in inter.values())
        variants = set(rolled) - set(inter)
        assert variants and not variants & accepted
        trained = {rid for t in run.trainer.of("start_training") for rid in t["rollout_ids"]}
        assert not any(rid.startswith("i0-") for rid in trained)
        given = [i for i in run.critic.interventions if i is not None]
        assert given and all(isinstance(i, Intervention) for i in given)
        both = [*inter.values(), *run.steps["r1.intervene"]["result"].values()]
        assert {i.model_dump_json() for i in given} <= {Intervention.model_validate(o).model_dump_json() for o in both}
        assert all(d["intervened"] for d in run.steps["r0.diagnose"]["result"])
    mean_calls = [c for c in runs["coda"].trainer.of("collect_rollouts") if c["tag"] == "i0"]
    assert not {sid for c in mean_calls for sid in c["scene_ids"]} & set(runs["coda"].steps["r0.intervene"]["result"])
    assert not any(o["original_success"] for o in runs["coda"].steps["r0.intervene"]["result"].values())
    sampled_calls = [c for c in sampled.trainer.of("collect_rollouts") if c["tag"] == "i0"]
    assert set(sampled_calls[0]["scene_ids"]) == set(sampled.steps["r0.intervene"]["result"])  # unchanged first
    for name in ("evidence_critic", "domain_rand", "uniform", "sft"):
        assert not runs[name].steps.get("r0.intervene", {}).get("result"), name
    assert all(i is None for i in runs["evidence_critic"].critic.interventions)


def test_undo_interventions_take_the_suspect_away_or_report_that_there_is_none(tmp_path):
    """With `intervention="undo"` the variants are the counterfactuals (familiar_task, declutter, nominal): a
    factor they do not apply to is listed as absent (it cannot be the cause) and has no variants."""
    from agent.roles.critic import Intervention

    run = run_method(tmp_path, "coda", preset=replace(PRESET, intervention="undo"))
    outcomes = [o for r in (0, 1) for o in run.steps[f"r{r}.intervene"]["result"].values() if not o["original_success"]]
    assert outcomes
    for o in outcomes:
        assert set(o["variants"]) == {"task", "layout", "attributes"}
        assert set(o.get("absent", [])) <= {"task", "layout", "attributes"}
        assert all(o["variants"][f] == [] for f in o.get("absent", []))
        Intervention.model_validate(o)
    # seed scenes carry train templates and their instances' own attributes: nothing to undo there in round 0
    assert all({"task", "attributes"} <= set(o.get("absent", [])) for o in run.steps["r0.intervene"]["result"].values()
               if not o["original_success"])
    with pytest.raises(ValueError, match="intervention must be one of resample, undo"):
        replace(PRESET, intervention="remove")


def test_execution_modes_get_no_scene_variants_and_their_scenes_join_the_bc_data(tmp_path):
    """With interventions, a mode where no factor change helped (execution) is never turned into layout variants:
    its units go to novel scenes and its failing scenes are cloned from the planner in the next update."""
    run = run_method(tmp_path, "coda", critic_factor="execution")
    assert {d["factor"] for d in run.steps["r0.diagnose"]["result"]} == {"execution"}
    assert not batches(run, 1).get("targeted") and not batches(run, 1).get("control")
    modes = {d["mode_id"] for d in run.steps["r0.diagnose"]["result"]}
    allocated = set(run.steps["r1.allocate"]["result"].get("per_mode", {})) & modes
    assert allocated
    execution = {d["scene_id"] for d in run.steps["r0.diagnose"]["result"] if d["mode_id"] in allocated}
    trains = run.trainer.of("start_training")
    assert execution & set(trains[1]["demo_scene_ids"])
    assert not execution & {s["scene_id"] for s in run.steps["r1.generate"]["result"]}
    evidence_only = run_method(tmp_path, "evidence_critic", critic_factor="execution")
    assert batches(evidence_only, 1).get("targeted"), "without interventions execution modes get layout variants"


def test_nearby_execution_variants_keep_the_failing_scene_close(tmp_path):
    """With `execution_variants="nearby"` an execution mode gets targeted near-duplicates of its failing scenes
    (the task's object 1-3 cm away, slightly turned; nothing else changed) against attribute-varied controls."""
    from sim.spec import SceneSpec

    run = run_method(tmp_path, "coda", preset=replace(PRESET, execution_variants="nearby"),
                     critic_factor="execution")
    made = [s for s in run.steps["r1.generate"]["result"] if s["verified"]]
    targeted = [s for s in made if s["batch"] == "targeted"]
    assert targeted and any(s["batch"] == "control" for s in made)
    scenes = {p.stem: SceneSpec.model_validate_json(p.read_text()) for p in (run.run_dir / "scenes").glob("*.json")}
    by_hash = {spec.spec_hash(): spec for spec in scenes.values()}
    for s in targeted:
        new, parent = scenes[s["scene_id"]], by_hash[s["parent"]]
        assert s["operator"] == "nearby" and new.task == parent.task and new.attributes == parent.attributes
        moved = [(p, q) for p, q in zip(parent.layout.placements, new.layout.placements, strict=True) if p != q]
        assert len(moved) == 1
        (p, q), = moved
        assert 0.01 - 1e-3 <= math.hypot(q.x - p.x, q.y - p.y) <= 0.03 + 1e-3
    with pytest.raises(ValueError, match="execution_variants must be one of none, nearby"):
        replace(PRESET, execution_variants="far")


def test_dt_only_drops_the_seed_scene_demos(tmp_path):
    from dataclasses import replace

    from agent.methods import METHODS

    METHODS["dt_only_probe"] = replace(METHODS["coda"], name="dt_only_probe", round_data="dt_only")
    try:
        probe = run_method(tmp_path, "dt_only_probe")
    finally:
        del METHODS["dt_only_probe"]
    trains = probe.trainer.of("start_training")
    assert trains and all(not t["demo_families"] and t["demo_scene_ids"] and t["bc_successes"] for t in trains)
    with_dt = run_method(tmp_path, "with_dt")  # D_t added to the family demos
    assert [t["demo_scene_ids"] for t in trains] == [t["demo_scene_ids"] for t in with_dt.trainer.of("start_training")]


def test_the_critic_is_trained_only_where_something_reads_it(runs):
    """Branch AWR uses Monte-Carlo advantages, so the chunk critic is updated only for critic action selection."""
    for name, run in runs.items():
        for t in run.trainer.of("start_training"):
            assert (t["critic_updates"] > 0) == (name == "frozen_critic_select"), name


def test_targeted_variants_spread_over_the_modes_failing_scenes(tmp_path):
    """A mode's targeted and control variants come from several of its failing scenes, not from one parent."""
    from dataclasses import replace

    run = run_method(tmp_path, "coda", preset=replace(PRESET, targeted_per_family=10))
    allocated = run.steps["r1.allocate"]["result"]["per_mode"]
    assert allocated
    for mode_id, k in allocated.items():
        # the mode's failing scenes when round 2 generated: those diagnosed in round 1
        found = list(dict.fromkeys(d["scene_id"] for d in run.steps["r0.diagnose"]["result"]
                                   if d["mode_id"] == mode_id))
        made = [s for s in run.steps["r1.generate"]["result"] if s["mode_id"] == mode_id and s["batch"] == "targeted"]
        parents = {s["parent"] for s in made}
        assert parents <= set(found)
        assert len(parents) == min(k // 2, len(found), len(made)), (k, parents)
    assert any(k // 2 >= 2 for k in allocated.values())


def test_replay_binds_stored_generation_programs_to_new_parents(tmp_path):
    """With generation memory, half of a mode's replay units apply its stored generation program to fresh seed
    scenes of its family (roles bound to the new scene's objects): new parents, not only the scenes where the mode
    was found; the other half are variants of the mode's own scenes."""
    from dataclasses import replace

    run = run_method(tmp_path, "coda", preset=replace(PRESET, rounds=3, targeted_per_family=6, eps_replay=0.5))
    assert run.steps["r1.compile"]["result"], "round 1 validates a mode and stores its generation program"
    found = {d["scene_id"] for k in ("r0.diagnose", "r1.diagnose") for d in run.steps[k]["result"]}
    k = sum(run.steps["r2.allocate"]["result"]["replay_per_mode"].values())
    replay = [s for s in run.steps["r2.generate"]["result"] if s["batch"] == "replay"]
    assert k >= 2 and len(replay) == k
    fresh = [s for s in replay if s["parent"] not in found]
    assert len(fresh) == k // 2 and all(set(s["binding"]) == {"target"} for s in fresh)  # the program's roles
    assert all(s["parent"] in found for s in replay if s not in fresh)


def test_round_update_is_passed_to_the_trainer(tmp_path, runs):
    from dataclasses import replace

    run = run_method(tmp_path, "coda", preset=replace(PRESET, round_update="branch"))
    assert {t["collect"] for t in run.trainer.of("start_training")} == {"branch"}
    assert {t["collect"] for t in runs["coda"].trainer.of("start_training")} == {"bc"}  # the default
    assert {t["critic_updates"] for t in runs["coda"].trainer.of("start_training")} == {0}  # nothing reads a critic
    critic = run_method(tmp_path / "critic", "coda", preset=replace(PRESET, round_update="critic"))
    calls = critic.trainer.of("start_training")
    assert {t["collect"] for t in calls} == {"critic"}
    assert {t["critic_updates"] for t in calls} == {PRESET.critic_updates} and PRESET.critic_updates > 0
    assert {t["balance_families"] for t in runs["coda"].trainer.of("start_training")} == {True}  # the default
    plain = run_method(tmp_path / "plain", "coda", preset=replace(PRESET, bc_balance=False))
    assert {t["balance_families"] for t in plain.trainer.of("start_training")} == {False}


def test_interim_evaluations_are_small_and_the_final_one_is_full(tmp_path):
    """interim_eval_per_suite sizes the evaluations after the rounds before the last; before the first round and
    after the last the loop evaluates at eval_per_suite (the paired before → after comparison)."""
    from dataclasses import replace

    run = run_method(tmp_path, "coda", preset=replace(PRESET, eval_per_suite=3, interim_eval_per_suite=1))
    steps = run.steps
    assert {e["n"] for e in steps["r0.eval"]["result"]} == {1}
    assert {e["n"] for e in steps["r1.eval"]["result"]} == {3}
    assert steps["eval.after"]["result"] == steps["r1.eval"]["result"]


def test_paired_ood_compares_the_same_scenes():
    """The paired OOD difference uses per-scene outcomes on the common prefix of each OOD suite; in-distribution
    suites do not count; without outcomes there is nothing to pair."""
    from agent.experiment.metrics import paired_ood

    def ev(suite, outcomes):
        return {"family": "stack", "suite": suite, "n": len(outcomes), "success_rate": outcomes.count("1") / len(outcomes),
                "outcomes": outcomes}

    before = [ev("in", "0000"), ev("layouts", "0101"), ev("tasks", "1100")]
    after = [ev("in", "1111"), ev("layouts", "1101"), ev("tasks", "11")]  # tasks: an interim evaluation, 2 scenes
    got = paired_ood(before, after)
    # layouts +1/4 (one scene flips), tasks 0 on the 2 common scenes; mean over the two OOD suites
    assert got["suites"] == 2 and abs(got["points"] - 12.5) < 1e-9
    assert abs(got["se"] - 100 * math.sqrt(0.25 / 4) / 2) < 1e-9  # var of (1,0,0,0) with ddof 1 = 0.25; tasks 0
    assert paired_ood([{**e, "outcomes": None} for e in before], after) is None


def test_tables_pair_methods_on_the_scenes_of_each_seed():
    """CoDA minus each other method, paired scene by scene within a seed, then pooled over the seeds."""
    from agent.experiment.tables import paired_between

    def cell(method, seed, outcomes):
        return {"method": method, "seed": seed, "eval_after": [
            {"family": "stack", "suite": "layouts", "n": len(outcomes), "success_rate": outcomes.count("1") / 4,
             "outcomes": outcomes}]}

    by_method = {"uniform": [cell("uniform", 0, "0000"), cell("uniform", 1, "1100")],
                 "coda": [cell("coda", 0, "1100"), cell("coda", 1, "1100")]}
    got, md = paired_between(by_method, ["uniform", "coda"])
    d = got["coda - uniform"]
    assert d["per_seed"][0]["points"] == 50.0 and d["per_seed"][1]["points"] == 0.0
    assert d["pooled"]["points"] == 25.0 and d["pooled"]["seeds"] == 2
    assert abs(d["pooled"]["se"] - math.sqrt(d["per_seed"][0]["se"] ** 2) / 2) < 1e-9  # seed 1: no variance
    assert "coda − uniform" in md and "+25.0" in md
    # the seeds' differences 50 and 0 spread by 25 points of s.e., far more than the episodes' s.e. says
    assert d["pooled"]["se_between_seeds"] == 25.0 and "± 25.0 |" in md
    assert paired_between({"coda": by_method["coda"]}, ["coda"])[0] == {}


def test_cells_from_different_base_policies_are_not_paired():
    """A seed whose base was retrained (another machine's torch kernels) holds cells from two bases: those pairs
    are left out rather than mixed into the paired difference."""
    from agent.experiment.tables import paired_between

    def cell(method, seed, outcomes, before):
        return {"method": method, "seed": seed, "mean_ood_before": before, "in_dist_before": 0.5, "eval_after": [
            {"family": "stack", "suite": "layouts", "n": 4, "success_rate": outcomes.count("1") / 4,
             "outcomes": outcomes}]}

    by_method = {"uniform": [cell("uniform", 0, "0000", 0.40), cell("uniform", 1, "0000", 0.41)],
                 "coda": [cell("coda", 0, "1100", 0.40), cell("coda", 1, "1100", 0.43)]}
    d = paired_between(by_method, ["uniform", "coda"])[0]["coda - uniform"]
    assert list(d["per_seed"]) == [0] and d["pooled"]["seeds"] == 1
    by_method["coda"][1]["base_sha"] = by_method["uniform"][1]["base_sha"] = "ab12"  # digests decide where known
    assert paired_between(by_method, ["uniform", "coda"])[0]["coda - uniform"]["pooled"]["seeds"] == 2


def test_a_retrained_base_refuses_cells_made_from_another(tmp_path):
    import json

    from agent.experiment.cells import check_cells_base
    from agent.experiment.metrics import mean_ood

    evals = [{"family": "stack", "suite": s, "n": 4, "success_rate": r, "outcomes": None}
             for s, r in (("in", 0.5), ("layouts", 0.25))]
    (tmp_path / "cells").mkdir()
    ok = {"seed": 3, "backbone": "transformer", "mean_ood_before": mean_ood(evals), "in_dist_before": 0.5}
    (tmp_path / "cells" / "sft-s3.json").write_text(json.dumps(ok))
    (tmp_path / "cells" / "program_transfer-s3.json").write_text(json.dumps({"seed": 3}))  # no base evaluation
    base = {"eval": evals, "sha": "ab12"}
    check_cells_base(tmp_path, 3, "transformer", base)  # same evaluation: accepted
    (tmp_path / "cells" / "coda-s3.json").write_text(json.dumps({**ok, "mean_ood_before": 0.3}))
    with pytest.raises(ValueError, match="coda-s3.json of seed 3 started from another base"):
        check_cells_base(tmp_path, 3, "transformer", base)
    check_cells_base(tmp_path, 4, "transformer", base)  # other seeds are not concerned


def test_modes_below_the_band_send_their_scenes_to_bc(tmp_path):
    """A mode whose variants all fail (layout variants always fail in the scripted trainer: hardness 0) is below
    the success band: variants teach nothing, so its failing scenes join the next update's planner demos."""
    from dataclasses import replace

    run = run_method(tmp_path, "no_dt", preset=replace(PRESET, rounds=3))
    modes = run.steps["r1.modes"]["result"]["modes"]  # memory after round 2, before round 3's update
    too_hard = [m["id"] for m in modes if m["hardness"] is not None and m["hardness"] < PRESET.band[0]]
    assert too_hard
    scenes = {sid for m in too_hard for sid in run.state["mode_scenes"].get(m, [])[:2]}
    trains = run.trainer.of("start_training")
    assert scenes and scenes <= set(trains[2]["demo_scene_ids"])
    blind = run_method(tmp_path, "uniform", preset=replace(PRESET, rounds=3))  # no critic: no modes, D_t only
    assert all(set(t.get("demo_scene_ids") or []) <= set(buffer_scene_ids(blind, r))
               for r, t in enumerate(blind.trainer.of("start_training")))


def test_dt_failed_plans_only_the_scenes_where_every_rollout_failed(tmp_path):
    from dataclasses import replace

    from agent.methods import METHODS

    METHODS["dt_failed_probe"] = replace(METHODS["coda"], name="dt_failed_probe", round_data="dt_failed")
    try:
        probe = run_method(tmp_path, "dt_failed_probe")
    finally:
        del METHODS["dt_failed_probe"]
    kinds = set()
    for r, t in enumerate(probe.trainer.of("start_training")):
        rolled = probe.steps[f"r{r}.rollouts"]["result"]
        solved = {x["scene_id"] for x in rolled if x["success"]}
        failed = {x["scene_id"] for x in rolled} - solved
        kinds |= {"failed"} if failed else set()
        kinds |= {"solved"} if solved else set()
        assert failed <= set(t.get("demo_scene_ids") or []) and not solved & set(t.get("demo_scene_ids") or [])
        assert t["bc_successes"] and t["demo_families"]
    assert kinds == {"failed", "solved"}, "the scripted outcomes give both kinds"


def test_suite_table_marks_floor_and_ceiling_cells():
    from agent.experiment.tables import suite_table

    def cell(method, rates):
        return {"method": method, "seed": 0, "eval_after": [
            {"family": "stack", "suite": s, "success_rate": r} for s, r in rates.items()]}

    by_method = {"sft": [cell("sft", {"in": 0.5, "tasks": 0.0, "seed": 0.95})],
                 "coda": [cell("coda", {"in": 0.6, "tasks": 0.03, "seed": 0.97})]}
    got, md = suite_table(by_method, ["sft", "coda"])
    assert got["stack/in"]["flag"] is None and got["stack/tasks"]["flag"] == "floor"
    assert got["stack/seed"]["flag"] == "ceiling" and got["stack/seed"]["success"]["coda"] == 0.97
    assert "| stack | tasks | 0.0 | 3.0 | floor |" in md


# --- a shared round 1 per seed (protocol v2.1) -------------------------------------------------------------------


def test_only_methods_with_the_common_round_1_share_it():
    sharing = {m.name for m in METHODS.values() if m.shares_round0}
    assert {"coda", "uniform", "success_guided", "no_memory"} <= sharing
    assert not sharing & {"sft", "domain_rand", "frozen_critic_select", "memory_transfer"}


def test_round_1_update_is_loaded_only_when_its_arguments_match(tmp_path, runs):
    """A cell offered the shared round's update loads its checkpoint instead of training, and takes its
    evaluation, exactly when its own training arguments have the shared digest; otherwise it trains."""
    own = runs["uniform"].steps["r0.train"]["result"]
    shared_eval = [{**e, "success_rate": 0.75} for e in BASE_EVAL]
    shared = {"train": {**own, "checkpoint": "step000777"}, "eval": shared_eval}
    run = run_method(tmp_path, "uniform", shared_round0=shared, name="same")
    assert run.trainer.of("load_checkpoint") == [{"tag": "base"}, {"tag": "step000777"}]
    assert len(run.trainer.of("start_training")) == 1  # round 2 only
    assert run.steps["r0.train"]["result"]["shared_round0"] is True
    assert run.steps["r0.eval"]["result"] == shared_eval
    other = {"train": {**own, "checkpoint": "step000777", "args_digest": "0" * 16}, "eval": shared_eval}
    run = run_method(tmp_path, "uniform", shared_round0=other, name="other")
    assert run.trainer.of("load_checkpoint") == [{"tag": "base"}] and len(run.trainer.of("start_training")) == 2
    assert "shared_round0" not in run.steps["r0.train"]["result"]
    assert run.steps["r0.eval"]["result"] != shared_eval


def test_a_cell_adopts_the_shared_run_before_its_update_and_a_resumed_cell_keeps_its_own(tmp_path):
    from agent.experiment.shared import SHARED_STEPS, adopt_round0

    src = tmp_path / "shared"
    (src / "checkpoints").mkdir(parents=True)
    (src / "checkpoints" / "base.pt").write_bytes(b"base")
    (src / "checkpoints" / "step000070.pt").write_bytes(b"after")
    (src / "checkpoints" / "latest.pt").write_bytes(b"after")
    (src / "scenes").mkdir()
    (src / "scenes" / "abc.json").write_text("{}")
    steps = {k: {"result": k, "seconds": 1.0} for k in (*SHARED_STEPS, "r0.allocate", "r0.train", "r0.eval")}
    write_json(src / "state.json", {"steps": steps, "order": list(steps)})
    cell = tmp_path / "runs" / "coda-s0"
    assert adopt_round0(cell, {"dir": str(src)})
    state = json.loads((cell / "state.json").read_text())
    assert state["order"] == list(SHARED_STEPS) and all(state["steps"][k]["shared"] for k in SHARED_STEPS)
    assert (cell / "checkpoints" / "latest.pt").read_bytes() == b"base"  # the policy before the update
    assert (cell / "checkpoints" / "step000070.pt").read_bytes() == b"after"
    assert (cell / "scenes" / "abc.json").exists()
    (cell / "scenes" / "mine.json").write_text("{}")
    assert not adopt_round0(cell, {"dir": str(src)})  # a resumed cell keeps its own
    assert (cell / "scenes" / "mine.json").exists()
    unfinished = tmp_path / "unfinished"
    write_json(unfinished / "state.json", {"steps": {"seed.sft": {"result": 1}}, "order": ["seed.sft"]})
    with pytest.raises(RuntimeError, match="lacks the steps"):
        adopt_round0(tmp_path / "runs" / "uniform-s0", {"dir": str(unfinished)})
    assert not (tmp_path / "runs" / "uniform-s0").exists()


@pytest.mark.slow
@pytest.mark.integration
def test_a_shared_round_1_is_run_once_and_changes_nothing_but_the_cost(tmp_path):
    """With share_round0 the sharing cells start from one round-1 run; a uniform cell then gives the same
    scenes, rollouts and evaluations as a uniform cell that ran round 1 itself from the same base."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}

    def experiment(out, methods, *extra):
        cmd = [sys.executable, "-m", "coda.cli", "experiment", "--methods", methods, "--seeds", "1", "--preset",
               "tiny", "--out", str(out), "--embedder", "hashing", "--json", *extra]
        done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900, env=env)
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stderr

    shared_out, plain_out = tmp_path / "shared", tmp_path / "plain"
    log = experiment(shared_out, "uniform,coda", "--set", "share_round0=true")
    assert log.count("] shared round 1 of seed 0") == 1
    info = json.loads((shared_out / "shared" / "round0-transformer-s0" / "shared.json").read_text())
    cells = {m: json.loads((shared_out / "cells" / f"{m}-s0.json").read_text()) for m in ("uniform", "coda")}
    assert all(c["metrics"]["shared_round0"] for c in cells.values())
    coda = json.loads((shared_out / "runs" / "coda-s0" / "state.json").read_text())["steps"]
    assert coda["r0.eval"]["result"] == info["eval"] and not coda["r0.intervene"].get("shared")
    plain_out.mkdir()
    subprocess.run(["cp", "-r", str(shared_out / "base"), str(plain_out)], check=True)
    experiment(plain_out, "uniform")
    a, b = (json.loads((o / "runs" / "uniform-s0" / "state.json").read_text())["steps"] for o in (shared_out, plain_out))

    def outcomes(step):
        return [(e["family"], e["suite"], e.get("outcomes"), e["success_rate"]) for e in step["result"]]

    for k in ("r0.generate", "r0.rollouts", "r1.generate", "r1.rollouts"):
        assert a[k]["result"] == b[k]["result"], k
    for k in ("r0.eval", "r1.eval", "eval.after"):
        assert outcomes(a[k]) == outcomes(b[k]), k


def test_tables_pool_experiments_with_different_seeds(tmp_path):
    """`coda experiment --tables --pool A --pool B`: one table over both experiments' cells, each pending cell
    from its own experiment's plan; a cell in two of them (the same method and seed) is refused."""
    fake_cell.calls, fake_cell.crash_at = [], None
    run_experiment(tmp_path / "a", ["sft", "coda", "uniform"], [0, 1], PRESET, cell_runner=fake_cell)
    run_experiment(tmp_path / "b", ["sft", "coda"], [2], PRESET, cell_runner=fake_cell)
    t = write_tables(tmp_path / "pooled", sources=[tmp_path / "a", tmp_path / "b"])
    assert t["ood"]["coda"]["pick_place"][2] == 3 and t["ood"]["uniform"]["pick_place"][2] == 2
    assert t["pending_cells"] == []  # uniform was never planned for seed 2
    assert "Pooled from" in (tmp_path / "pooled" / "results.md").read_text()
    run_experiment(tmp_path / "c", ["coda"], [1], PRESET, cell_runner=fake_cell)
    with pytest.raises(ValueError, match="coda-s1 is in both"):
        write_tables(tmp_path / "pooled2", sources=[tmp_path / "a", tmp_path / "c"])
    assert not (tmp_path / "pooled2").exists()
    done = subprocess.run([sys.executable, "-m", "coda.cli", "experiment", "--tables", "--out", str(tmp_path / "a"),
                           "--pool", str(tmp_path / "b")], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 2 and "holds an experiment of its own" in done.stderr


def test_critic_consistency_and_batch_success():
    from agent.experiment.metrics import batch_success, critic_consistency

    diags = [{"round": "r0", "scene_id": "a", "mode_id": "m1"}, {"round": "r0", "scene_id": "a", "mode_id": "m1"},
             {"round": "r0", "scene_id": "b", "mode_id": "m1"}, {"round": "r0", "scene_id": "b", "mode_id": "m2"},
             {"round": "r1", "scene_id": "a", "mode_id": "m3"}]  # another round's scene a: not paired with r0's
    assert critic_consistency(diags) == 0.5
    assert critic_consistency(diags[:1]) is None
    rollouts = [{"batch": "targeted", "success": True}, {"batch": "targeted", "success": False},
                {"batch": "control", "success": True}]
    assert batch_success(rollouts, "targeted") == 0.5 and batch_success(rollouts, "control") == 1.0
    assert batch_success(rollouts, "replay") is None


def test_recreating_targeted_operators_never_redraw_or_ease_the_diagnosed_factor(tmp_path):
    """targeted_operators="recreate": a spatial grasp mode's targeted variants crowd or turn the target (never a
    layout resample); its control batch still varies another factor."""
    from agent.roles.engine import recreating_operators

    assert "resample" not in recreating_operators("layout", "grasp")
    assert "fewer_goals" not in recreating_operators("task", "place")
    assert recreating_operators("layout", "place") == ("tighten",)
    assert "resample" not in recreating_operators("attributes", "approach")  # no own operators: the factor's
    run = run_method(tmp_path, "coda", preset=replace(PRESET, targeted_operators="recreate"))
    scenes = [s for k, v in run.steps.items() if k.endswith(".generate") for s in v["result"]]
    targeted = [s for s in scenes if s["batch"] == "targeted"]
    assert targeted and {s["operator"] for s in targeted} <= set(recreating_operators("layout", "grasp"))
    assert {s["factor"] for s in scenes if s["batch"] == "control"} == {"attributes"}
    with pytest.raises(ValueError, match="targeted_operators must be one of all, recreate"):
        replace(PRESET, targeted_operators="harder")


def test_kept_targeted_batches_vary_another_factor_than_the_modes(tmp_path, runs):
    """targeted_batches="keep": a mode's targeted variants (and replay variants of its scenes) vary the factor its
    control batch varied by default, and the control batch redraws the mode's own factor; "vary" is the default."""
    run = run_method(tmp_path, "coda", preset=replace(PRESET, targeted_batches="keep", rounds=3, eps_replay=0.5,
                                                      targeted_per_family=6))
    scenes = [s for k, v in run.steps.items() if k.endswith(".generate") for s in v["result"]]
    default = [s for k, v in runs["coda"].steps.items() if k.endswith(".generate") for s in v["result"]]

    def factors(rows, batch):
        return {s["factor"] for s in rows if s["batch"] == batch}

    assert factors(default, "targeted") == {"layout"} and factors(default, "control") == {"attributes"}
    assert factors(scenes, "targeted") == {"attributes"} and factors(scenes, "control") == {"layout"}
    assert {s["operator"] for s in scenes if s["batch"] == "control"} == {"resample"}
    found = {d["scene_id"] for k in ("r0.diagnose", "r1.diagnose") for d in run.steps[k]["result"]}
    own = [s for s in scenes if s["batch"] == "replay" and s["parent"] in found]  # not the programs' new parents
    assert own and factors(own, "replay") == {"attributes"}
    assert PRESET.targeted_batches == "vary"
    with pytest.raises(ValueError, match="targeted_batches must be one of vary, keep"):
        replace(PRESET, targeted_batches="swap")


def test_domain_randomized_novel_scenes_start_after_the_common_round(tmp_path, runs):
    """novel_scenes="domain_rand": round 1 keeps the common seed scenes (its scenes equal default CoDA's), a later
    round's novel environments are domain-randomized family scenes (batch "novel", operator "domain_rand")."""
    run = run_method(tmp_path, "coda", preset=replace(PRESET, novel_scenes="domain_rand"))
    first = [s["scene_id"] for s in run.steps["r0.generate"]["result"]]
    assert first == [s["scene_id"] for s in runs["coda"].steps["r0.generate"]["result"]]
    later = [s for s in run.steps["r1.generate"]["result"] if s["verified"]]
    novel = [s for s in later if s["batch"] == "novel"]
    assert novel and {s["operator"] for s in novel} == {"domain_rand"}
    assert not [s for s in later if s["batch"] == "seed"]
    assert sum(batches(run, 1).values()) == 4  # the same accepted budget
    with pytest.raises(ValueError, match="novel_scenes must be one of seed, domain_rand, uniform"):
        replace(PRESET, novel_scenes="wide")


def test_uniform_novel_scenes_are_variants_of_earlier_scenes(tmp_path, runs):
    """novel_scenes="uniform": round 1 keeps the common seed scenes; a later round's novel environments are
    one-factor variants of scenes accepted in earlier rounds (batch "novel"), no fresh seed scenes."""
    run = run_method(tmp_path, "coda", preset=replace(PRESET, novel_scenes="uniform"))
    first = [s["scene_id"] for s in run.steps["r0.generate"]["result"]]
    assert first == [s["scene_id"] for s in runs["coda"].steps["r0.generate"]["result"]]
    later = [s for s in run.steps["r1.generate"]["result"] if s["verified"]]
    novel = [s for s in later if s["batch"] == "novel"]
    assert novel and {s["parent"] for s in novel} <= set(first)
    assert {s["factor"] for s in novel} <= {"layout", "attributes", "task"}
    assert not [s for s in later if s["batch"] == "seed"]
    assert sum(batches(run, 1).values()) == 4  # the same accepted budget


def test_a_training_replicate_reseeds_the_rounds_after_the_common_first(tmp_path, runs):
    """train_replicate=k: every policy update after round 1 asks the trainer for replicate k; round 1's update (the
    common round a seed's cells share) and the data of round 1 stay as they are."""
    run = run_method(tmp_path, "coda", preset=replace(PRESET, train_replicate=2))
    trains = run.trainer.of("start_training")
    assert len(trains) == PRESET.rounds and [t["replicate"] for t in trains] == [0] + [2] * (PRESET.rounds - 1)
    assert trains[0] == runs["coda"].trainer.of("start_training")[0]
    assert all(t["replicate"] == 0 for t in runs["coda"].trainer.of("start_training"))
    with pytest.raises(ValueError, match="train_replicate must be >= 0"):
        replace(PRESET, train_replicate=-1)


def test_round_takeover_asks_every_update_for_the_failed_rollouts_windows(tmp_path, runs):
    """round_takeover: each round's update asks the trainer for the planner's windows from the round's own failed
    rollouts (takeover_failed); off (the default), none does."""
    run = run_method(tmp_path, "coda", preset=replace(PRESET, round_takeover=True))
    assert [t["takeover_failed"] for t in run.trainer.of("start_training")] == [True] * PRESET.rounds
    assert not any(t["takeover_failed"] for t in runs["coda"].trainer.of("start_training"))


def test_modes_keyed_by_factor_reach_the_memory(tmp_path):
    """mode_key="factor" (the default): failures the critic places in two phases share a mode; under
    "factor_phase" they do not."""
    phases = ("grasp", "approach")

    def modes(run) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for d in (d for k, v in run.steps.items() if k.endswith(".diagnose") for d in v["result"]):
            out.setdefault(d["mode_id"], set()).add(d["phase"])
        return out

    by_factor = modes(run_method(tmp_path, "coda", preset=replace(PRESET, mode_key="factor"), critic_phases=phases,
                                 name="by-factor"))
    by_phase = modes(run_method(tmp_path, "coda", preset=replace(PRESET, mode_key="factor_phase"),
                                critic_phases=phases, name="by-phase"))
    assert any(p == set(phases) for p in by_factor.values()), by_factor
    assert all(len(p) == 1 for p in by_phase.values()) and len(by_phase) > len(by_factor), by_phase
    with pytest.raises(ValueError, match="mode_key must be one of factor_phase, factor"):
        replace(PRESET, mode_key="phase")


def test_round_demos_accumulate_unless_the_round_alone_is_asked_for(tmp_path):
    """`round_demos` (the paper's accumulated buffer, the default): a round's update clones the planner on this
    round's D_t and then on every earlier round's; round 1 is the same either way, and so are the own successes and
    the base-demo mix. With "round" each update clones its own round's D_t only."""
    for mode in ("accumulated", "round"):
        run = run_method(tmp_path, "with_dt", preset=replace(PRESET, round_demos=mode), name=mode)
        first, second = run.trainer.of("start_training")
        planned_beyond(run, first["demo_scene_ids"], round_scene_ids(run, 0))
        earlier = [s for s in round_scene_ids(run, 0) if s not in round_scene_ids(run, 1)]
        assert earlier, "round 1's scenes are not round 2's"
        planned_beyond(run, second["demo_scene_ids"], round_scene_ids(run, 1) + (earlier if mode == "accumulated" else []))
        assert (set(earlier) <= set(second["demo_scene_ids"])) == (mode == "accumulated")
        assert second["bc_successes"] and second["demo_families"] == ["pick_place"]
    assert PRESET.round_demos == "accumulated"
    with pytest.raises(ValueError, match="round_demos must be one of round, accumulated"):
        replace(PRESET, round_demos="all")


def test_round_rollouts_mean_rolls_out_the_evaluated_policy_once_per_environment(tmp_path):
    """`round_rollouts=mean` (the default): a round's rollouts and its learning-progress check use the policy's mean
    action, one rollout per environment; with `sample` they sample `rollouts_per_scene` each."""
    def rounds_of(run):
        return [c for c in run.trainer.of("collect_rollouts") if c["tag"][0] in "rp"]

    assert PRESET.round_rollouts == "mean"
    mean = run_method(tmp_path, "coda", name="mean")
    sample = run_method(tmp_path, "coda", preset=replace(PRESET, round_rollouts="sample"), name="sample")
    assert {c["tag"][0] for c in rounds_of(mean)} == {"r", "p"}, "rounds and learning progress both roll out"
    assert all(c["mode"] == "mean" and c["per_scene"] == 1 for c in rounds_of(mean))
    assert all(c["mode"] == "sample" and c["per_scene"] == PRESET.rollouts_per_scene == 2 for c in rounds_of(sample))
    assert len(mean.steps["r0.rollouts"]["result"]) * 2 == len(sample.steps["r0.rollouts"]["result"])
    with pytest.raises(ValueError, match="round_rollouts must be one of sample, mean"):
        replace(PRESET, round_rollouts="greedy")


def test_success_guided_keeps_sampled_rollouts_and_its_own_round_1_under_mean_rollouts(tmp_path):
    """Success-guided reads a success rate per environment from its rollouts: under `round_rollouts=mean` it still
    samples `rollouts_per_scene` (one deterministic rollout gives 0 or 1, never inside the band), so its round 1 is
    not the shared one; the other sharing methods roll out the mean action and keep sharing."""
    from agent.experiment.shared import shares_round0

    mean = replace(PRESET, round_rollouts="mean")
    run = run_method(tmp_path, "success_guided", preset=mean, name="sg")
    assert {(c["mode"], c["per_scene"]) for c in run.trainer.of("collect_rollouts") if c["tag"][0] == "r"} == {
        ("sample", PRESET.rollouts_per_scene)}
    assert run.state["r1.success_pool"], "rates from two sampled rollouts put scenes inside the band"
    sampled = replace(PRESET, round_rollouts="sample")
    assert shares_round0(METHODS["success_guided"], sampled) and not shares_round0(METHODS["success_guided"], mean)
    assert shares_round0(METHODS["coda"], mean) and shares_round0(METHODS["uniform"], mean)


def test_a_recorded_preset_without_a_later_field_does_what_the_code_did_before_it():
    """A run recorded before `round_rollouts` / `round_demos` existed sampled its rollouts and cloned the round's
    own demos, so reading its preset back gives those values, not today's defaults; a recorded value is kept."""
    from agent.presets import Preset

    recorded = PRESET.to_dict()
    del recorded["round_rollouts"], recorded["round_demos"]
    then = Preset.from_dict(recorded)
    assert (then.round_rollouts, then.round_demos) == ("sample", "round")
    assert (PRESET.round_rollouts, PRESET.round_demos) == ("mean", "accumulated")
    assert Preset.from_dict(PRESET.to_dict()) == PRESET


def test_a_shared_round_run_with_another_round_1_preset_is_refused():
    """A shared round 1 is reused only by presets that would make the same round 1 (base aside): other seed scenes
    or other rollouts are named; later-round settings are not."""
    from agent.experiment.shared import round0_changes

    sampled = replace(PRESET, round_rollouts="sample")
    recorded = sampled.to_dict()
    del recorded["round_rollouts"]  # a shared run recorded before the field existed sampled its rollouts
    assert round0_changes(recorded, sampled) == []
    assert round0_changes(recorded, replace(sampled, rounds=5, round_demos="round", mode_key="factor_phase")) == []
    assert round0_changes(recorded, PRESET) == ["round_rollouts"]
    assert round0_changes(recorded, replace(sampled, seed_scenes_per_family=9, rollouts_per_scene=3)) == [
        "seed_scenes_per_family", "round_rollouts"]
