"""A mini co-evolution round performed only through tool calls: stdio clients of the four servers (`coda serve NAME`)
share one run directory. The roles run here in the test, as the orchestrator would run them: the offline failure
critic reads `get_rollout_evidence`, and the Text2potential templates of the offline compiler are checked with the
verifier's `check_potential` (attempt ladder: refined phase, plain phase, one subgoal per goal).

    base SFT → create scenes → verify → record → rollouts → diagnose → record → allocate → compile a potential
    → start and finish a short shaped training job

Every tool of the trainer server is called here over stdio at least once."""

from __future__ import annotations

import asyncio
import time

import pytest
from mcp import Client
from mcp_testing import SCENE_PROGRAM, err, ok, stdio_params

pytestmark = pytest.mark.integration  # starts server subprocesses


class Recorder:
    """A client whose tool calls are remembered by name."""

    def __init__(self, client):
        self.client, self.called = client, set()

    async def call_tool(self, name: str, args: dict):
        self.called.add(name)
        return await self.client.call_tool(name, args)

    async def list_tools(self):
        return await self.client.list_tools()


async def finish(c, job_id: str, limit_s: float = 300) -> dict:
    deadline = time.monotonic() + limit_s
    while True:
        status = await ok(c, "wait_job", {"job_id": job_id, "timeout_s": 30})
        if status["state"] in ("succeeded", "failed", "cancelled", "interrupted"):
            return status
        assert time.monotonic() < deadline, f"job {job_id} still {status['state']} after {limit_s} s"


async def compile_potential(sim, verifier, scene_id: str, rollout_id: str, diagnosis) -> tuple[str, dict]:
    """The offline compiler's templates for the diagnosis, each checked by the verifier until one passes."""
    from sim.engine.potential_templates import cause_objects, write_program
    from sim.spec import SceneSpec

    spec = SceneSpec.model_validate((await ok(sim, "get_scene", {"scene_id": scene_id}))["spec"])
    named = cause_objects(diagnosis.cause, spec.object_names())
    errors = []
    for level in (2, 1, 0):
        source = write_program(spec, factor=diagnosis.factor, phase=diagnosis.phase, cause=diagnosis.cause,
                               tool="awr_shaped", level=level, cause_objects=named)
        check = await ok(verifier, "check_potential", {"source": source, "scene_id": scene_id,
                                                       "trace_ids": [rollout_id]})
        if check["ok"]:
            return source, check
        errors.append(check["errors"])
    raise AssertionError(f"no potential template passed the verifier: {errors}")


def test_mini_round_through_tool_calls(tmp_path):
    from agent.roles.critic import OfflineCritic
    from sim.evidence.models import Evidence

    async def main():
        async with Client(stdio_params("trainer", tmp_path)) as trainer_client:
            trainer = Recorder(trainer_client)
            # the base policy trains while the other servers start and the scenes are made
            sft = await ok(trainer, "train_sft", {"families": ["pick_place"], "demos_per_family": 3, "updates": 2})
            async with (Client(stdio_params("sim", tmp_path)) as sim,
                        Client(stdio_params("verifier", tmp_path)) as verifier,
                        Client(stdio_params("memory", tmp_path, "--embedder", "hashing")) as memory):
                # --- generate and verify scenes ----------------------------------------------------------
                made = [await ok(sim, "create_scene", {"source": SCENE_PROGRAM}),
                        await ok(sim, "sample_scene", {"family": "pick_place", "seed": 3})]
                scene_ids = [s["scene_id"] for s in made]
                for s in made:
                    report = await ok(verifier, "verify_scene", {"scene_id": s["scene_id"]})
                    assert report["passed"], report["summary"]
                    await ok(memory, "record_scene", {"scene": {
                        "id": s["scene_id"], "family": s["family"], "program": SCENE_PROGRAM, "verified": True,
                        "spec_hash": s["scene_id"], "round": 0}})

                # --- base policy, rollouts ---------------------------------------------------------------
                done = await finish(trainer, sft["job_id"])
                assert done["state"] == "succeeded" and done["result"]["demos"] == 3, done
                job = await ok(trainer, "collect_rollouts", {"scene_ids": scene_ids, "per_scene": 1, "tag": "r0"})
                done = await finish(trainer, job["job_id"])
                assert done["state"] == "succeeded", done
                rollouts = done["result"]
                assert sorted(r["scene_id"] for r in rollouts) == sorted(scene_ids)
                await ok(memory, "record_rollouts", {"rollouts": [{**r, "round": 0} for r in rollouts]})  # as given

                # --- diagnose failures from their evidence and record them --------------------------------
                failed = [r for r in rollouts if not r["success"]]
                assert failed, "a policy after 2 BC updates should fail somewhere"
                diagnosed = []
                for r in failed:
                    ev = await ok(trainer, "get_rollout_evidence", {"rollout_id": r["rollout_id"]})
                    d = OfflineCritic().diagnose(Evidence.model_validate(ev["evidence"]))
                    rec = await ok(memory, "record_diagnosis", {"diagnosis": {
                        "id": f"d-{r['rollout_id']}", "scene_id": r["scene_id"], "rollout_ids": [r["rollout_id"]],
                        "factor": d.factor, "phase": d.phase, "cause": d.cause, "round": 0,
                        "evidence": {"step_indices": d.evidence_steps, "state_facts": d.state_facts}}})
                    diagnosed.append((r, d, rec["mode_id"]))
                modes = (await ok(memory, "list_modes", {}))["result"]
                assert {m["id"] for m in modes} == {mode_id for _, _, mode_id in diagnosed}

                # --- allocate the next round's budget ----------------------------------------------------
                plan = await ok(memory, "allocate_budget", {"budget": 10, "round": 0})
                assert plan["targeted"] > 0 and set(plan["per_mode"]) <= {m["id"] for m in modes}

                # --- compile a potential for the first diagnosis, check it, store it ---------------------
                r, d, mode_id = diagnosed[0]
                source, check = await compile_potential(sim, verifier, r["scene_id"], r["rollout_id"], d)
                assert check["rollouts"] == [r["rollout_id"]] and check["demos"]
                await ok(memory, "put_training_program", {"program": {
                    "id": f"t-{mode_id}", "mode_id": mode_id, "phase": d.phase,
                    "subgoals": check["report"]["subgoals"], "potential_code": source,
                    "learning_tool": "awr_shaped", "round": 0}})
                stored = (await ok(memory, "get_training_programs", {"mode_id": mode_id}))["result"]
                assert [p["potential_code"] for p in stored] == [source]

                # --- shaped training: start it and wait for it to finish ---------------------------------
                job = await ok(trainer, "start_training", {
                    "rollout_ids": [x["rollout_id"] for x in rollouts],
                    "potential_programs": {r["scene_id"]: source}, "critic_updates": 2, "policy_updates": 2})
                done = await finish(trainer, job["job_id"])
                assert done["state"] == "succeeded", done
                trained = done["result"]
                assert trained["shaped_rollouts"] == 1 and trained["episodes"] == len(rollouts)
                # the policy updates' branch rollouts in the shaped scene are cut and valued by the potential
                assert trained["branch"]["shaped_groups"] >= 1
                assert trained["branch"]["shaped_groups"] < trained["branch"]["groups"] or len(
                    {x["scene_id"] for x in rollouts}) == 1
                await ok(memory, "update_learning_progress", {"mode_id": mode_id, "before": 0.0, "after": 0.0,
                                                              "round": 0, "training_program_id": f"t-{mode_id}",
                                                              "updates": trained["updates"]})

            # --- the rest of the trainer's tools ---------------------------------------------------------
            ckpts = await ok(trainer, "list_checkpoints", {})
            assert ckpts["checkpoints"] == ["base", "latest", trained["checkpoint"]] and ckpts["has_critic"]
            frame = await trainer.call_tool("rollout_keyframe", {"rollout_id": r["rollout_id"], "step": 0,
                                                                 "size": 64})
            assert not frame.is_error and frame.content[0].type == "image"
            job = await ok(trainer, "evaluate", {"families": ["pick_place"], "n": 1})
            evaluated = await finish(trainer, job["job_id"])
            assert evaluated["state"] == "succeeded" and evaluated["result"][0]["n"] == 1, evaluated
            assert (await ok(trainer, "get_job", {"job_id": job["job_id"]}))["state"] == "succeeded"
            assert len((await ok(trainer, "list_jobs", {}))["result"]) == 4
            assert (await ok(trainer, "cancel_job", {"job_id": job["job_id"]}))["state"] == "succeeded"  # done
            assert "unknown rollout id" in await err(trainer, "get_rollout_evidence", {"rollout_id": "r0-nope"})
            assert (await ok(trainer, "load_checkpoint", {"tag": "base"}))["current_step"] == 2  # still serving
            # started without --import-checkpoints: nothing to install from, said so (tests/servers/
            # test_trainer_server.py installs a shared base)
            assert "--import-checkpoints" in await err(trainer, "install_checkpoint", {"name": "base"})
            # an external benchmark task: robosuite in its own venv, or, without that venv, the setup command
            from policy.external.base import has_package

            if has_package("robosuite"):
                job = await ok(trainer, "evaluate_external", {"tasks": ["robosuite:Lift"], "n": 1, "evidence": True})
                done = await finish(trainer, job["job_id"])
                assert done["state"] == "succeeded", done
                [row] = done["result"]
                assert (row["suite"], row["n"], row["family"]) == ("robosuite:Lift", 1, "pick_place")
                assert len(row["failures"]) == 1 - round(row["success_rate"])
            else:
                assert "scripts/setup --external" in await err(trainer, "evaluate_external",
                                                               {"tasks": ["robosuite:Lift"]})
            listed = {t.name for t in (await trainer.list_tools()).tools}
            assert trainer.called == listed, f"not called over stdio: {listed - trainer.called}"

    asyncio.run(main())
