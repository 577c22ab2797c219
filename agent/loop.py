"""The orchestrated co-evolution loop (SPEC §5–8), entirely through MCP tool calls to the four servers.

    seed:   base policy by SFT on planner demos; evaluation before
    round:  allocate → generate (novel / targeted + control / replay) → verify → record → rollouts →
            diagnose (≤ C failures per stratum) → cluster into modes → validate (targeted < control) →
            compile generation + training programs (Text2potential) → route and train (K_Q, K_π) →
            learning progress → evaluation
    end:    evaluation after, memory export, report

The roles (engine, critic, compiler) run in this process with the chosen backend; everything they touch in the
simulator, verifier, memory and trainer goes through the hub. Each step is memoized in `RunState`, and memory
writes use deterministic ids, so `--resume` neither loses nor duplicates records.
"""

from __future__ import annotations

import hashlib
import logging
import sys
import time
from collections import defaultdict
from pathlib import Path

from agent.hub import Hub, ToolError
from agent.presets import Preset
from agent.roles.factory import Roles
from agent.runstate import RunState
from sim.constants import OOD_SUITES

log = logging.getLogger(__name__)

SUITES = ("in", *OOD_SUITES)
WAIT_S = 45.0


def say(msg: str) -> None:
    print(f"[coda] {msg}", file=sys.stderr, flush=True)


class CoEvolution:
    def __init__(self, hub: Hub, roles: Roles, run_dir: Path, preset: Preset, run_id: str):
        self.hub, self.roles, self.preset, self.run_id = hub, roles, preset, run_id
        self.run_dir = Path(run_dir)
        self.state = RunState(self.run_dir)
        self.state.set("preset", preset.to_dict())
        self.state.set("backend", roles.backend)

    # --- tool plumbing --------------------------------------------------------------------------
    def call(self, server: str, tool: str, **args):
        return self.hub.call(server, tool, args).data

    def job(self, tool: str, **args) -> object:
        """Start a trainer job and wait for it (progress is shown); returns its result."""
        job_id = self.call("trainer", tool, **args)["job_id"]
        while True:
            status = self.call("trainer", "wait_job", job_id=job_id, timeout_s=WAIT_S)
            if status["state"] in ("succeeded", "failed", "cancelled", "interrupted"):
                break
            if status.get("total"):
                say(f"  {tool}: {status['done']:.0f}/{status['total']:.0f} {status.get('message', '')}")
        if status["state"] != "succeeded":
            raise RuntimeError(f"trainer job {tool} {status['state']}: {status.get('error')}")
        return status["result"]

    def save_ledger(self) -> None:
        self.state.set("tokens", self.roles.ledger.to_dict())

    # --- the run --------------------------------------------------------------------------------
    def run(self) -> dict:
        p = self.preset
        say(f"run {self.run_id}: preset {p.name}, families {', '.join(p.families)}, backend {self.roles.backend}")
        t0 = time.perf_counter()
        self.state.step("seed.sft", lambda: self.job(
            "train_sft", families=list(p.families), demos_per_family=p.demos_per_family, updates=p.sft_updates))
        say("base policy trained (SFT on planner demonstrations)")
        self.state.step("eval.before", self.evaluate)
        for r in range(p.rounds):
            self.round(r)
            if r > 0 and not self.state.result(f"r{r}.modes")["in_band"]:
                say("no mode left in the success band: stopping")
                break
        last = [k for k in self.state.data["order"] if k.endswith(".eval")]
        # the last round's evaluation already measured the final policy
        self.state.step("eval.after", lambda: self.state.result(last[-1]) if last else self.evaluate())
        self.state.step("export", lambda: self.call("memory", "export_memory", directory="exports/memory"))
        self.state.set("wall_seconds", self.state.get("wall_seconds", 0.0) + time.perf_counter() - t0)
        self.state.set("mcp_seconds", self.state.get("mcp_seconds", 0.0) + self.hub.overhead_seconds())
        self.save_ledger()
        return self.state.data

    def evaluate(self) -> list[dict]:
        p = self.preset
        res = self.job("evaluate", families=list(p.families), suites=list(SUITES), n=p.eval_per_suite)
        say("evaluation: " + ", ".join(f"{e['family']}/{e['suite']} {e['success_rate']:.2f}" for e in res))
        return res

    def round(self, r: int) -> None:
        p, st = self.preset, self.state
        say(f"round {r + 1}/{p.rounds}")
        alloc = st.step(f"r{r}.allocate", lambda: self.call(
            "memory", "allocate_budget", budget=p.budget(), eps_novel=p.eps_novel, eps_replay=p.eps_replay,
            band_low=p.band[0], band_high=p.band[1], round=r))
        scenes = st.step(f"r{r}.generate", lambda: self.generate(r, alloc))
        ok = [s for s in scenes if s["verified"]]
        say(f"  generated {len(scenes)} scenes, {len(ok)} verified")
        rollouts = st.step(f"r{r}.rollouts", lambda: self.rollouts(r, ok))
        say(f"  {len(rollouts)} rollouts, success {_rate(rollouts):.2f}")
        diags = st.step(f"r{r}.diagnose", lambda: self.diagnose(r, scenes, rollouts))
        say(f"  {len(diags)} failures diagnosed into {len({d['mode_id'] for d in diags})} modes")
        verdicts = st.step(f"r{r}.validate", lambda: self.validate(r, scenes, rollouts))
        compiled = st.step(f"r{r}.compile", lambda: self.compile(r, verdicts, scenes, rollouts))
        st.step(f"r{r}.train", lambda: self.train(r, rollouts, compiled))
        st.step(f"r{r}.progress", lambda: self.progress(r, verdicts, scenes, rollouts, compiled))
        st.step(f"r{r}.modes", lambda: self.mode_summary(r))
        st.step(f"r{r}.eval", self.evaluate)
        self.save_ledger()

    # --- generation -----------------------------------------------------------------------------
    def generate(self, r: int, alloc: dict) -> list[dict]:
        """Novel seed programs, targeted + control batches per allocated mode, replay variants; all created,
        verified and recorded. Units of modes without a parent scene go to novel environments."""
        p, engine = self.preset, self.roles.engine
        mode_scenes = self.state.get("mode_scenes", {})
        programs, unused = [], 0
        for mode_id, k in (alloc["per_mode"] if r > 0 else {}).items():
            parent = self._parent(mode_id, mode_scenes)
            if parent is None or k <= 0:
                unused += k
                continue
            mode = self.call("memory", "get_mode", mode_id=mode_id)
            targeted, control = engine.batches(parent, mode["factor"], mode["phase"], max(1, k // 2), seed=1000 * r)
            programs += [(pr, mode_id) for pr in targeted + control]
        for mode_id, k in (alloc.get("replay_per_mode", {}) if r > 0 else {}).items():
            parent = self._parent(mode_id, mode_scenes)
            if parent is None or k <= 0:
                unused += k
                continue
            mode = self.call("memory", "get_mode", mode_id=mode_id)
            made = engine.variants(parent, _scene_factor(mode["factor"]), k, seed=7 * r + 1, batch="replay")
            programs += [(pr, mode_id) for pr in made]
        novel = p.seed_scenes_per_family * len(p.families) if r == 0 else alloc["novel"] + unused
        if r > 0 and not alloc["per_mode"]:
            novel = max(novel, alloc["budget"])
        for i in range(novel):
            family = p.families[i % len(p.families)]
            programs += [(pr, None) for pr in engine.seed_programs(family, 1, start_seed=10_000 * (r + 1) + i)]
        return [self._create(r, pr, mode_id) for pr, mode_id in programs]

    def _parent(self, mode_id: str, mode_scenes: dict):
        from sim.spec import SceneSpec

        ids = mode_scenes.get(mode_id) or []
        if not ids:
            return None
        detail = self.call("sim", "get_scene", scene_id=ids[0])
        return SceneSpec.model_validate(detail["spec"])

    def _create(self, r: int, program, mode_id: str | None) -> dict:
        family, batch = program.family, program.batch
        try:
            info = self.call("sim", "create_scene", source=program.source, seed=program.seed)
        except ToolError as exc:
            rec_id = f"failed-r{r}-{hashlib.sha256(program.source.encode()).hexdigest()[:16]}"
            self.call("memory", "record_scene", scene={
                "id": rec_id, "family": family, "program": program.source, "verified": False, "round": r,
                "run_id": self.run_id, "violations": [{"check": "executes", "message": exc.message[:500]}],
                "batch": batch, "mode_id": mode_id})
            return {"scene_id": rec_id, "family": family, "batch": batch, "mode_id": mode_id, "verified": False}
        scene_id = info["scene_id"]
        report = self.call("verifier", "verify_scene", scene_id=scene_id)
        violations = [{"check": c["name"], "message": c["message"][:500], "objects": c.get("objects", [])}
                      for c in report["checks"] if not c["passed"]]
        self.call("memory", "record_scene", scene={
            "id": scene_id, "family": family, "program": program.source, "spec_hash": scene_id,
            "verified": report["passed"], "violations": violations, "batch": batch, "mode_id": mode_id,
            "round": r, "run_id": self.run_id})
        return {"scene_id": scene_id, "family": family, "batch": batch, "mode_id": mode_id,
                "verified": report["passed"], "program": program.source}

    # --- rollouts and diagnosis -----------------------------------------------------------------
    def rollouts(self, r: int, scenes: list[dict]) -> list[dict]:
        if not scenes:
            return []
        ids = list(dict.fromkeys(s["scene_id"] for s in scenes))
        result = self.job("collect_rollouts", scene_ids=ids, per_scene=self.preset.rollouts_per_scene, seed=r,
                          tag=f"r{r}")
        info = {s["scene_id"]: s for s in scenes}
        records = [{"id": x["rollout_id"], "scene_id": x["scene_id"], "policy_id": f"{self.run_id}@r{r}",
                    "success": x["success"], "steps": x["steps"], "episode_return": float(x["success"]),
                    "seed": r, "phase_reached": "other", "round": r, "run_id": self.run_id} for x in result]
        for i in range(0, len(records), 200):
            self.call("memory", "record_rollouts", rollouts=records[i : i + 200])
        by_scene = defaultdict(list)
        for x in result:
            by_scene[x["scene_id"]].append(x["success"])
        for sid, outcomes in by_scene.items():
            s = info[sid]
            self.call("memory", "record_scene", scene={
                "id": sid, "family": s["family"], "program": s.get("program", ""), "spec_hash": sid,
                "verified": True, "batch": s["batch"], "mode_id": s["mode_id"], "round": r, "run_id": self.run_id,
                "success_rate": sum(outcomes) / len(outcomes), "n_rollouts": len(outcomes)})
        return [{**x, "family": info[x["scene_id"]]["family"], "batch": info[x["scene_id"]]["batch"],
                 "mode_id": info[x["scene_id"]]["mode_id"]} for x in result]

    def diagnose(self, r: int, scenes: list[dict], rollouts: list[dict]) -> list[dict]:
        from sim.evidence.models import Evidence

        strata = defaultdict(list)
        for x in rollouts:
            if not x["success"]:
                strata[(x["family"], x["batch"], x["mode_id"] or "")].append(x)
        out, mode_scenes = [], self.state.get("mode_scenes", {})
        for key in sorted(strata):
            for x in strata[key][: self.preset.max_diagnoses]:
                ev = self.call("trainer", "get_rollout_evidence", rollout_id=x["rollout_id"])
                evidence = Evidence.model_validate(ev["evidence"])
                try:
                    d = self.roles.critic.diagnose(None, evidence)
                except Exception as exc:  # noqa: BLE001 - a role failure skips this rollout, the round goes on
                    log.warning("critic failed on %s: %s", x["rollout_id"], exc)
                    continue
                rec = self.call("memory", "record_diagnosis", diagnosis={
                    "id": f"d-{x['rollout_id']}", "scene_id": x["scene_id"], "rollout_ids": [x["rollout_id"]],
                    "factor": d.factor, "phase": d.phase, "cause": d.cause, "round": r, "run_id": self.run_id,
                    "evidence": {"step_indices": d.evidence_steps, "state_facts": d.state_facts}})
                mode_scenes.setdefault(rec["mode_id"], [])
                if x["scene_id"] not in mode_scenes[rec["mode_id"]]:
                    mode_scenes[rec["mode_id"]].append(x["scene_id"])
                out.append({"rollout_id": x["rollout_id"], "scene_id": x["scene_id"], "mode_id": rec["mode_id"],
                            "factor": d.factor, "phase": d.phase, "cause": d.cause})
        self.state.set("mode_scenes", mode_scenes)
        self.save_ledger()
        return out

    # --- validation, compilation, training ------------------------------------------------------
    def validate(self, r: int, scenes: list[dict], rollouts: list[dict]) -> dict:
        by_mode = defaultdict(lambda: {"targeted": [], "control": []})
        for x in rollouts:
            if x["mode_id"] and x["batch"] in ("targeted", "control"):
                by_mode[x["mode_id"]][x["batch"]].append(x["success"])
        verdicts = {}
        for mode_id, b in by_mode.items():
            if not b["targeted"] or not b["control"]:
                continue
            t, c = _mean(b["targeted"]), _mean(b["control"])
            status = "validated" if t < c else "refuted"
            self.call("memory", "set_mode_status", mode_id=mode_id, status=status, round=r,
                      reason=f"targeted success {t:.2f} vs control {c:.2f}")
            self.call("memory", "update_hardness", mode_id=mode_id, successes=sum(b["targeted"]),
                      n=len(b["targeted"]), round=r, band_low=self.preset.band[0], band_high=self.preset.band[1])
            verdicts[mode_id] = {"status": status, "targeted": t, "control": c}
        return verdicts

    def compile(self, r: int, verdicts: dict, scenes: list[dict], rollouts: list[dict]) -> dict:
        from agent.roles.compiler import CompileRequest
        from sim.spec import SceneSpec

        out = {}
        for mode_id, v in verdicts.items():
            if v["status"] != "validated":
                continue
            mode = self.call("memory", "get_mode", mode_id=mode_id)
            targeted = [s for s in scenes if s["mode_id"] == mode_id and s["batch"] == "targeted" and s["verified"]]
            if not targeted:
                continue
            parent_id = self.state.get("mode_scenes", {}).get(mode_id, [targeted[0]["scene_id"]])[0]
            self.call("memory", "put_generation_program", program={
                "id": f"g-{mode_id}-r{r}", "mode_id": mode_id, "parent_scene_id": parent_id,
                "factor": _scene_factor(mode["factor"]), "variants": [s["scene_id"] for s in targeted],
                "family": targeted[0]["family"], "success_on_variants": v["targeted"], "round": r,
                "run_id": self.run_id, "roles": ["target"]})
            scene = targeted[0]
            spec = SceneSpec.model_validate(self.call("sim", "get_scene", scene_id=scene["scene_id"])["spec"])
            diag = _Diag(mode["factor"], mode["phase"], mode["description"])
            traces = [x["rollout_id"] for x in rollouts if x["scene_id"] == scene["scene_id"]][:3]
            checks: list[dict] = []

            def checker(source: str, scene_id=scene["scene_id"], traces=traces, checks=checks):
                """Φ checked by the verifier server on this scene's rollouts and its planner demonstration."""
                from sim.potential import PotentialReport

                checks.append(self.call("verifier", "check_potential", source=source, scene_id=scene_id,
                                        trace_ids=traces))
                return PotentialReport.model_validate({**checks[-1]["report"], "ok": checks[-1]["ok"],
                                                       "errors": checks[-1]["errors"]})

            request = CompileRequest(diagnosis=diag, spec=spec, success_rate=v["targeted"], checker=checker,
                                     has_demo=True)
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
                "run_id": self.run_id, "evidence": {"check_passed": check.get("passed"), "targeted": v["targeted"]}})
            out[mode_id] = {"training_program_id": tp_id, "source": prog.source, "passed": check.get("passed", False),
                            "learning_tool": prog.learning_tool,
                            "scene_ids": [s["scene_id"] for s in targeted], "family": scene["family"]}
        self.save_ledger()
        return out

    def train(self, r: int, rollouts: list[dict], compiled: dict) -> dict:
        p = self.preset
        if not rollouts:
            return {"skipped": "no rollouts"}
        potentials, bc_families = {}, set()
        for c in compiled.values():
            if c["learning_tool"] == "bc":
                bc_families.add(c["family"])
            elif c["learning_tool"] == "awr_shaped" and c["passed"]:
                potentials.update({sid: c["source"] for sid in c["scene_ids"]})
        return self.job("start_training", rollout_ids=[x["rollout_id"] for x in rollouts],
                        potential_programs=potentials, demo_families=sorted(bc_families or set(p.families)),
                        demos_per_family=max(1, p.demos_per_family // 2), critic_updates=p.critic_updates,
                        policy_updates=p.policy_updates, lora=p.lora)

    def progress(self, r: int, verdicts: dict, scenes: list[dict], rollouts: list[dict], compiled: dict) -> dict:
        """Learning progress per mode: success on its targeted scenes before vs after this round's training."""
        out = {}
        for mode_id in verdicts:
            ids = [s["scene_id"] for s in scenes if s["mode_id"] == mode_id and s["batch"] == "targeted"
                   and s["verified"]]
            before = [x["success"] for x in rollouts if x["scene_id"] in ids]
            if not ids or not before:
                continue
            after = self.job("collect_rollouts", scene_ids=ids, per_scene=self.preset.rollouts_per_scene,
                             mode="sample", seed=r, tag=f"p{r}")
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


def _scene_factor(diagnosis_factor: str) -> str:
    return {"task": "task", "spatial": "layout", "attribute": "attributes", "execution": "layout"}[diagnosis_factor]


def _mean(xs) -> float:
    xs = list(xs)
    return sum(xs) / len(xs) if xs else 0.0


def _rate(rollouts: list[dict]) -> float:
    return _mean(x["success"] for x in rollouts)
