"""The trainer server in memory: tools and annotations, rollouts and their evidence, shaped training, checkpoints,
cancellation, and errors that name what to fix. A tiny policy (d_model 32) stands in for the base SFT; the stdio
mini-round (test_mini_round.py) runs the real train_sft."""

from __future__ import annotations

import asyncio
import os
import shutil
import time

import pytest
from mcp import Client
from mcp_testing import err, ok, text

from servers.trainer import build_server
from sim.scene_store import SceneStore

TOOLS = {  # name: (read_only, destructive, idempotent)
    "train_sft": (False, True, False),
    "collect_rollouts": (False, False, False),
    "get_rollout_evidence": (True, False, True),
    "rollout_keyframe": (True, False, True),
    "start_training": (False, False, False),
    "evaluate": (False, False, False),  # starts a job: not to be retried
    "evaluate_external": (False, False, False),
    "list_checkpoints": (True, False, True),
    "load_checkpoint": (False, False, True),
    "install_checkpoint": (False, False, True),
    "get_job": (True, False, True),
    "wait_job": (True, False, True),
    "list_jobs": (True, False, True),
    "cancel_job": (False, True, True),
}

POTENTIAL = '''
from sim import helpers as h


def clip01(x):
    return min(1.0, max(0.0, float(x)))


SUBGOALS = ["reach the {t}", "put the {t} in the {r}"]
LEARNING_TOOL = "awr_shaped"


def complete_1(s):
    return h.tcp_distance(s, "{t}") < 0.04 or h.is_grasped(s, "{t}")


def potential_1(s):
    return 1.0 - clip01(h.tcp_distance(s, "{t}") / 0.4)


def complete_2(s):
    return h.xy_distance(s, "{t}", "{r}") < 0.05 and not h.is_grasped(s, "{t}")


def potential_2(s):
    return 1.0 - clip01(h.xy_distance(s, "{t}", "{r}") / 0.5)
'''


def run(coro):
    return asyncio.run(coro)


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    """A run directory with a tiny policy (checkpoints base + latest), one pick_place scene and one rollout in it."""
    from policy.checkpoint import build_train_state, save_checkpoint
    from policy.config import PolicyConfig, TrainConfig
    from policy.service import TrainerService

    root = tmp_path_factory.mktemp("trainer-run")
    pcfg = PolicyConfig(d_model=32, n_layers=1, n_heads=2, ff_mult=2, n_candidates=2)
    state = build_train_state(pcfg, TrainConfig(batch_size=16, td_candidates=2, device="cpu"), with_critic=False)
    state.extra["kind"] = "sft"
    for tag in ("base", "latest"):
        save_checkpoint(root / "checkpoints" / f"{tag}.pt", state)
    store = SceneStore(root)
    scene_id = store.sample("pick_place", 3).scene_id
    [rollout] = TrainerService(root).rollouts([store.spec(scene_id)], 1, seed=0)
    spec = store.spec(scene_id)
    roles = {"t": spec.task.with_role("target")[0].name, "r": spec.task.with_role("receptacle")[0].name}
    potential = POTENTIAL.replace("{t}", roles["t"]).replace("{r}", roles["r"])
    return {"root": root, "scene_id": scene_id, "rollout": rollout, "potential": potential}


@pytest.fixture
def run_dir(seeded, tmp_path):
    """A fresh copy of the seeded run directory."""
    dst = tmp_path / "run"
    shutil.copytree(seeded["root"], dst)
    return dst


async def finish(c, job_id: str, limit_s: float = 120) -> dict:
    """wait_job until the job finished; its final status."""
    deadline = time.monotonic() + limit_s
    while True:
        status = await ok(c, "wait_job", {"job_id": job_id, "timeout_s": 20})
        if status["state"] in ("succeeded", "failed", "cancelled", "interrupted"):
            return status
        assert time.monotonic() < deadline, f"job {job_id} still {status['state']} after {limit_s} s"


def test_tools_annotations_and_schemas(tmp_path):
    async def main():
        async with Client(build_server(tmp_path)) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            assert set(tools) == set(TOOLS)
            for name, (ro, destructive, idem) in TOOLS.items():
                a = tools[name].annotations
                assert (a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint) == (
                    ro, destructive, idem, False), name
                assert tools[name].description, name
                for arg, prop in tools[name].input_schema.get("properties", {}).items():
                    assert prop.get("description"), f"{name}.{arg} has no description"
            for name in ("get_rollout_evidence", "list_checkpoints", "start_training", "get_job"):
                assert tools[name].output_schema is not None, name
            # no policy yet: a tool that needs one is refused at once with what to do, and starts no job
            empty = await ok(c, "list_checkpoints", {})
            assert empty == {"checkpoints": [], "current_step": None, "has_critic": False}
            scene_id = SceneStore(tmp_path).sample("pick_place", 0).scene_id
            for tool_name, args in (("collect_rollouts", {"scene_ids": [scene_id]}),
                                    ("evaluate", {"families": ["pick_place"], "n": 1}),
                                    ("evaluate_external", {"tasks": ["robosuite:Lift"], "n": 1})):
                message = await err(c, tool_name, args)
                assert "no policy yet" in message and "train_sft" in message and "load_checkpoint" in message
            assert (await ok(c, "list_jobs", {}))["result"] == []

    run(main())


def test_install_checkpoint_copies_from_the_import_directory_only(run_dir, tmp_path):
    """A shared checkpoint (an experiment's base policy) enters a run through install_checkpoint: copied once (a run
    that has its own keeps it), only from the directory the server was started with, and made current by
    load_checkpoint."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shutil.copyfile(run_dir / "checkpoints" / "base.pt", shared / "sft.pt")
    cell = tmp_path / "cell"

    async def main():
        async with Client(build_server(cell, import_dir=shared)) as c:
            got = await ok(c, "install_checkpoint", {"name": "sft", "tag": "base"})
            assert got == {"tag": "base", "installed": True, "checkpoints": ["base"]}
            assert (cell / "checkpoints" / "base.pt").read_bytes() == (shared / "sft.pt").read_bytes()
            assert (await ok(c, "install_checkpoint", {"name": "sft", "tag": "base"}))["installed"] is False
            assert "available: ['sft']" in await err(c, "install_checkpoint", {"name": "other"})
            assert "name" in await err(c, "install_checkpoint", {"name": "../sft"})
            assert (await ok(c, "list_checkpoints", {}))["current_step"] is None  # installing loads nothing
            assert (await ok(c, "load_checkpoint", {"tag": "base"}))["current_step"] is not None
        async with Client(build_server(tmp_path / "lone")) as c:
            assert "--import-checkpoints" in await err(c, "install_checkpoint", {"name": "sft"})

    run(main())


def test_malformed_arguments_name_the_argument(tmp_path):
    bad = [
        ("train_sft", {"families": ["juggling"]}, "families"),
        ("train_sft", {"families": ["stack"], "demos_per_family": 0}, "demos_per_family"),
        ("train_sft", {}, "families"),
        ("train_sft", {"families": ["stack"], "distribution": "narrow"}, "distribution"),
        ("evaluate", {"families": ["stack"], "suites": ["seeds"]}, "suites"),
        ("collect_rollouts", {"scene_ids": ["not-a-hash"]}, "scene_ids"),
        ("collect_rollouts", {"scene_ids": ["0123456789abcdef"], "per_scene": 99}, "per_scene"),
        ("collect_rollouts", {"scene_ids": ["0123456789abcdef"], "mode": "greedy"}, "mode"),
        ("collect_rollouts", {"scene_ids": ["0123456789abcdef"], "tag": "Bad Tag"}, "tag"),
        ("get_rollout_evidence", {"rollout_id": "../escape"}, "rollout_id"),
        ("rollout_keyframe", {"rollout_id": "r-1", "step": 0, "size": 4096}, "size"),
        ("rollout_keyframe", {"rollout_id": "r-1", "step": 0, "size": 481}, "size"),  # the framebuffer is 480 high
        ("rollout_keyframe", {"rollout_id": "r-1"}, "step"),
        ("start_training", {"rollout_ids": []}, "rollout_ids"),
        ("start_training", {"rollout_ids": ["r-1"], "critic_updates": -1}, "critic_updates"),
        ("start_training", {"rollout_ids": ["r-1"], "potential_programs": {"scene-x": "x = 1"}}, "potential_programs"),
        ("start_training", {"rollout_ids": ["r-1"], "demo_families": ["nope"]}, "demo_families"),
        ("start_training", {"rollout_ids": ["r-1"], "demo_scene_ids": ["not-a-hash"]}, "demo_scene_ids"),
        ("evaluate", {"families": ["stack"], "suites": ["everything"]}, "suites"),
        ("evaluate", {"families": ["stack"], "n": 0}, "n"),
        ("evaluate_external", {"tasks": ["robosuite"]}, "tasks"),
        ("evaluate_external", {"tasks": ["robosuite:Juggle"]}, "tasks"),
        ("evaluate_external", {"tasks": ["robosuite:Lift"], "n": 0}, "n"),
        ("evaluate_external", {"tasks": ["robosuite:Lift"], "first_group": -1}, "first_group"),
        ("load_checkpoint", {"tag": "../../etc/passwd"}, "tag"),
        ("get_job", {"job_id": "a/b"}, "job_id"),
        ("wait_job", {"job_id": "x", "timeout_s": 600}, "timeout_s"),
    ]

    async def main():
        async with Client(build_server(tmp_path)) as c:
            for tool, args, name in bad:
                message = await err(c, tool, args)
                assert name in message, f"{tool}({args}): {message}"
            assert (await ok(c, "list_checkpoints", {}))["checkpoints"] == []  # still serving

    run(main())


def test_unknown_ids_are_readable_and_the_server_keeps_serving(run_dir, seeded):
    async def main():
        async with Client(build_server(run_dir)) as c:
            for tool, args in (("get_rollout_evidence", {"rollout_id": "r-9-9-0000-deadbeef"}),
                               ("rollout_keyframe", {"rollout_id": "r-9-9-0000-deadbeef", "step": 0}),
                               ("start_training", {"rollout_ids": [seeded["rollout"]["rollout_id"],
                                                                  "r-9-9-0000-deadbeef"]})):
                message = await err(c, tool, args)
                assert "unknown rollout id" in message and "r-9-9-0000-deadbeef" in message, message
                assert "collect_rollouts" in message
            assert "unknown scene_id '0123456789abcdef'" in await err(
                c, "collect_rollouts", {"scene_ids": [seeded["scene_id"], "0123456789abcdef"]})
            assert "no checkpoint nope.pt" in await err(c, "load_checkpoint", {"tag": "nope"})
            assert "unknown job_id" in await err(c, "get_job", {"job_id": "train-000"})
            assert "unknown job_id" in await err(c, "cancel_job", {"job_id": "train-000"})
            rid = seeded["rollout"]["rollout_id"]
            assert "past the end" in await err(c, "rollout_keyframe", {"rollout_id": rid, "step": 10_000})
            assert "static checks" in await err(c, "start_training", {
                "rollout_ids": [rid], "potential_programs": {seeded["scene_id"]: "import os\n"}})
            # session 36 (red team): 256 programs of 100,000 characters were statically checked for 5-6 minutes
            # inside one call
            big = {f"{i:016x}": "x = 1\n" * 16_000 for i in range(11)}
            assert "at most 1,000,000" in await err(c, "start_training", {"rollout_ids": [rid],
                                                                           "potential_programs": big})
            assert (await ok(c, "list_checkpoints", {}))["current_step"] == 0  # still serving, nothing changed
            assert (await ok(c, "list_jobs", {}))["result"] == []  # no job was started by a refused call

    run(main())


def test_rollouts_evidence_keyframes_and_evaluation(run_dir, seeded):
    from sim.evidence.models import Evidence

    async def main():
        async with Client(build_server(run_dir)) as c:
            job = await ok(c, "collect_rollouts", {"scene_ids": [seeded["scene_id"]], "per_scene": 1, "tag": "t",
                                                     "seed": 5})
            assert job["kind"] == "rollouts"
            done = await finish(c, job["job_id"])
            assert done["state"] == "succeeded", done
            [r] = done["result"]
            assert r["scene_id"] == seeded["scene_id"] and r["rollout_id"].startswith("t-0-5-")  # tag-step-seed
            assert (run_dir / "rollouts" / f"{r['rollout_id']}.trace").is_file()

            ev = await ok(c, "get_rollout_evidence", {"rollout_id": r["rollout_id"]})
            assert ev["scene_id"] == seeded["scene_id"] and ev["steps"] == r["steps"] and ev["summary"]
            evidence = Evidence.model_validate(ev["evidence"])  # what the failure critic reads
            assert evidence.steps == r["steps"] and evidence.success == r["success"]

            with_frames = await c.call_tool("get_rollout_evidence", {"rollout_id": r["rollout_id"],
                                                                     "keyframes": True})
            assert not with_frames.is_error, text(with_frames)
            images = [b for b in with_frames.content if b.type == "image"]
            assert 2 <= len(images) <= 4 and all(b.mime_type == "image/png" for b in images)
            assert len(with_frames.structured_content["evidence"]["keyframes"]) == len(images)

            frame = await c.call_tool("rollout_keyframe", {"rollout_id": r["rollout_id"], "step": r["steps"],
                                                           "size": 64})
            assert not frame.is_error and frame.content[0].type == "image"

            job = await ok(c, "evaluate", {"families": ["pick_place"], "n": 1})
            done = await finish(c, job["job_id"])
            assert done["state"] == "succeeded", done
            [row] = done["result"]
            assert (row["family"], row["suite"], row["n"]) == ("pick_place", "in", 1)
            assert 0.0 <= row["success_rate"] <= 1.0

    run(main())


def test_shaped_training_checkpoints_and_restart(run_dir, seeded):
    rid, scene_id = seeded["rollout"]["rollout_id"], seeded["scene_id"]

    async def main():
        async with Client(build_server(run_dir)) as c:
            job = await ok(c, "start_training", {"rollout_ids": [rid], "potential_programs": {
                scene_id: seeded["potential"], "0123456789abcdef": seeded["potential"]},
                "critic_updates": 2, "policy_updates": 2, "collect": "rollouts"})
            assert job["kind"] == "train"
            done = await finish(c, job["job_id"])
            assert done["state"] == "succeeded", done
            info = done["result"]
            assert info["shaped_rollouts"] == 1 and info["episodes"] == 1 and info["updates"] == 4
            assert info["potential_scenes_without_rollouts"] == ["0123456789abcdef"]
            assert info["checkpoint"] == "step000002"
            ckpts = await ok(c, "list_checkpoints", {})
            assert ckpts == {"checkpoints": ["base", "latest", "step000002"], "current_step": 2, "has_critic": True}

            # a program that fails at run time on its scene is reported with its error and that scene's rollouts
            # train unshaped (one bad scene of a mode does not cost the round its training)
            broken = seeded["potential"].replace("return 1.0 - clip01(h.tcp_distance", "return 1.0 / 0 - clip01(h.tcp_distance")
            job = await ok(c, "start_training", {"rollout_ids": [rid], "potential_programs": {scene_id: broken},
                                                 "critic_updates": 1, "policy_updates": 1, "collect": "rollouts"})
            done = await finish(c, job["job_id"])
            assert done["state"] == "succeeded", done
            assert "ZeroDivisionError" in done["result"]["potential_failures"][scene_id], done["result"]
            assert done["result"]["shaped_rollouts"] == 0
            assert (await ok(c, "list_checkpoints", {}))["current_step"] == 3  # it trained (2 + 1 policy updates)
            # ... and so under branch AWR, which values cut branches by Φ (session 35, red team: the failing program
            # was handed to the branch rollouts anyway and its error aborted the job)
            job = await ok(c, "start_training", {"rollout_ids": [rid], "potential_programs": {scene_id: broken},
                                                 "critic_updates": 1, "policy_updates": 1, "collect": "branch"})
            done = await finish(c, job["job_id"])
            assert done["state"] == "succeeded", done
            assert "ZeroDivisionError" in done["result"]["potential_failures"][scene_id], done["result"]
            assert done["result"]["branch"]["shaped_groups"] == 0

            back = await ok(c, "load_checkpoint", {"tag": "base"})
            assert back["current_step"] == 0 and not back["has_critic"]

        async with Client(build_server(run_dir)) as c:  # a restarted server resumes from the loaded policy
            assert (await ok(c, "list_checkpoints", {}))["current_step"] == 0
            # rollouts saved by the earlier server are still there to train on; by default the policy updates
            # use branch rollouts in their scene (sampled chunks against the mean chunk from the same states)
            job = await ok(c, "start_training", {"rollout_ids": [rid], "critic_updates": 1, "policy_updates": 1})
            done = await finish(c, job["job_id"])
            assert done["state"] == "succeeded" and done["result"]["shaped_rollouts"] == 0, done
            branch = done["result"]["branch"]
            assert 1 <= branch["groups"] <= 2 and branch["chunks"] == 8 * branch["groups"], branch

    run(main())


def test_cancel_a_running_training_job(run_dir, seeded):
    rid = seeded["rollout"]["rollout_id"]

    async def main():
        async with Client(build_server(run_dir)) as c:
            job = await ok(c, "start_training", {"rollout_ids": [rid], "critic_updates": 400, "policy_updates": 0})
            job_id = job["job_id"]
            deadline = time.monotonic() + 60
            status = await ok(c, "get_job", {"job_id": job_id})
            while not (status["state"] == "running" and status["done"] > 0):
                assert status["state"] in ("queued", "running"), status
                assert time.monotonic() < deadline, f"no progress: {status}"
                await asyncio.sleep(0.2)
                status = await ok(c, "get_job", {"job_id": job_id})
            assert status["total"] == 400 and "critic_loss" in status["message"]
            # the policy is busy: loading a checkpoint now is refused with what to do
            assert "running job" in await err(c, "load_checkpoint", {"tag": "base"})
            cancelled = await ok(c, "cancel_job", {"job_id": job_id})
            assert cancelled["state"] in ("running", "cancelled")
            final = await finish(c, job_id, limit_s=60)
            assert final["state"] == "cancelled" and final["done"] < 400, final
            assert [j["job_id"] for j in (await ok(c, "list_jobs", {}))["result"]] == [job_id]
            # the partial update is discarded: the current policy is the one before the job
            ckpts = await ok(c, "list_checkpoints", {})
            assert ckpts == {"checkpoints": ["base", "latest"], "current_step": 0, "has_critic": False}
            assert (await ok(c, "load_checkpoint", {"tag": "base"}))["current_step"] == 0  # free again

    run(main())


def test_training_clones_planner_demos_of_given_scenes(run_dir, seeded):
    """demo_scene_ids: the planner runs on those scenes of the run's store and its successes join the BC demos
    (once per scene: a second training reuses them); unknown scene ids are refused naming them."""
    rid, scene_id = seeded["rollout"]["rollout_id"], seeded["scene_id"]

    async def main():
        async with Client(build_server(run_dir)) as c:
            message = await err(c, "start_training", {"rollout_ids": [rid],
                                                      "demo_scene_ids": [scene_id, "0123456789abcdef"]})
            assert "demo_scene_ids" in message and "'0123456789abcdef'" in message and scene_id not in message
            assert (await ok(c, "list_jobs", {}))["result"] == []  # refused before a job started
            for _ in range(2):
                job = await ok(c, "start_training", {"rollout_ids": [rid], "demo_scene_ids": [scene_id, scene_id],
                                                     "critic_updates": 1, "policy_updates": 1})
                done = await finish(c, job["job_id"])
                assert done["state"] == "succeeded", done
                assert done["result"]["scene_demos"] == 1, done["result"]
            job = await ok(c, "start_training", {"rollout_ids": [rid], "critic_updates": 1, "policy_updates": 1})
            done = await finish(c, job["job_id"])
            assert done["state"] == "succeeded" and done["result"]["scene_demos"] == 0, done

    run(main())


def test_scene_demos_are_planned_once_per_scene(seeded, tmp_path, monkeypatch):
    import policy.service as service_module
    from policy.service import TrainerService

    calls = []
    real = service_module.planner_demos

    def counting(specs, **kw):
        calls.append([s.spec_hash() for s in specs])
        return real(specs, **kw)

    monkeypatch.setattr(service_module, "planner_demos", counting)
    service = TrainerService(tmp_path)
    spec = SceneStore(seeded["root"]).spec(seeded["scene_id"])
    assert [d.spec_hash for d in service.demos_for_scenes([spec, spec])] == [seeded["scene_id"]]
    assert len(service.demos_for_scenes([spec])) == 1
    assert calls == [[seeded["scene_id"]]]


def test_training_clones_the_policys_own_successes_with_bc_successes(run_dir, seeded, monkeypatch):
    """bc_successes (D_t, issue 19): the successful ones of the given rollouts join the BC demos of the update,
    once each; failed rollouts and runs without the flag add none."""
    import policy.service as service_module
    from policy.service import TrainerService

    seen: list[list] = []
    real = service_module.branch_round

    def spy(state, specs, *, demos=None, **kw):
        seen.append(list(demos or []))
        return real(state, specs, demos=demos, **kw)

    monkeypatch.setattr(service_module, "branch_round", spy)
    service = TrainerService(run_dir)
    rid = seeded["rollout"]["rollout_id"]
    episode = service.episode(rid)
    assert not episode.success  # a tiny random policy
    info = service.train([rid], critic_updates=1, policy_updates=1, bc_successes=True)
    assert info["bc_successes"] == 0 and seen[-1] == []
    episode.success = True  # as if the rollout had succeeded
    info = service.train([rid, rid], critic_updates=1, policy_updates=1, bc_successes=True)
    assert info["bc_successes"] == 1 and len(seen[-1]) == 1 and seen[-1][0] is episode
    info = service.train([rid], critic_updates=1, policy_updates=1)
    assert info["bc_successes"] == 0 and seen[-1] == []


def test_bc_round_update_clones_the_demos_only(run_dir, seeded, monkeypatch):
    """collect='bc' (a round update of behaviour cloning on the BC data alone): no branch rollouts, BC updates on
    the planner demos of the given scenes; without any demonstration it is refused with what to give."""
    import policy.service as service_module
    from policy.service import TrainerService

    monkeypatch.setattr(service_module, "branch_round", lambda *a, **k: pytest.fail("no branch rollouts for bc"))
    service = TrainerService(run_dir)
    rid, spec = seeded["rollout"]["rollout_id"], SceneStore(run_dir).spec(seeded["scene_id"])
    before = service.require_state().step
    info = service.train([rid], scene_demos=[spec], critic_updates=1, policy_updates=3, collect="bc")
    assert info["scene_demos"] == 1 and info["bc"]["updates"] == 3 and "branch" not in info
    assert service.require_state().step > before
    with pytest.raises(ValueError, match="needs demonstrations"):
        service.train([rid], critic_updates=1, policy_updates=3, collect="bc")


def test_a_training_replicate_reseeds_the_update_on_the_same_data(run_dir, seeded):
    """replicate > 0: the same update on the same data from the same checkpoint gives another policy, the same one
    for the same replicate; replicate 0 keeps the state's own streams (the checkpoint's, resumed bit for bit)."""
    import torch

    from policy.service import TrainerService

    service = TrainerService(run_dir)
    rid, spec = seeded["rollout"]["rollout_id"], SceneStore(run_dir).spec(seeded["scene_id"])
    start = service.save("start")
    args = dict(scene_demos=[spec], critic_updates=0, policy_updates=4, collect="bc",
                demo_families=["pick_place"], demos_per_family=2)

    def weights(replicate: int) -> torch.Tensor:
        service.load(start)
        service.train([rid], replicate=replicate, **args)
        return torch.cat([p.detach().flatten() for p in service.require_state().policy.parameters()])

    own, again = weights(0), weights(0)
    one, one_again, two = weights(1), weights(1), weights(2)
    assert torch.equal(own, again) and torch.equal(one, one_again)
    assert not torch.equal(one, own) and not torch.equal(one, two)


def test_takeover_scenes_add_the_planners_corrective_windows_to_the_bc_data(run_dir, seeded, monkeypatch):
    """takeover_scenes: the policy is rolled out once per scene; each failure's diagnosed step is restored and the
    planner's certified window from there joins the BC data."""
    import policy.service as service_module
    from policy.service import TrainerService

    seen: list[list] = []
    real = service_module.demo_buffer
    monkeypatch.setattr(service_module, "demo_buffer", lambda demos, *a, **k: (seen.append(list(demos)),
                                                                               real(demos, *a, **k))[1])
    service = TrainerService(run_dir)
    rid, spec = seeded["rollout"]["rollout_id"], SceneStore(run_dir).spec(seeded["scene_id"])
    args = dict(critic_updates=0, policy_updates=1, collect="bc", scene_demos=[spec])
    service.train([rid], **args)
    plain = seen[-1]
    info = service.train([rid], takeover_scenes=[spec], **args)
    stats = info["takeover"]
    assert stats["scenes"] == 1 and stats["failed"] == 1 == stats["planner_calls"]  # the seeded policy fails it
    assert stats["certified"] == len(seen[-1]) - len(plain) == 1
    window = seen[-1][-1]
    assert window.spec_hash == spec.spec_hash() and window.success
    assert window.meta["takeover_step"] == stats["takeover_steps"][0] < window.meta["base_steps"]
    assert "takeover" not in service.train([rid], **args)
    # takeover_failed: the same windows from the given failed rollout's own trace, no new rollout
    info = service.train([rid], takeover_failed=True, **args)
    assert "takeover" not in info and info["takeover_rollouts"]["failed"] == 1 == info["takeover_rollouts"]["planner_calls"]
    assert len(seen[-1]) - len(plain) == info["takeover_rollouts"]["certified"]
    assert seen[-1][-1].meta["base_steps"] == seeded["rollout"]["steps"]


def test_bc_update_balances_families_on_request(run_dir, seeded, monkeypatch):
    """balance_families: the BC data of the update has each family's episodes repeated to the largest family's
    transitions; without it, the data is the demos as they are."""
    import policy.service as service_module
    from policy.service import TrainerService

    seen: list[list] = []
    real = service_module.demo_buffer
    monkeypatch.setattr(service_module, "demo_buffer", lambda demos, *a, **k: (seen.append(list(demos)),
                                                                               real(demos, *a, **k))[1])
    service = TrainerService(run_dir)
    rid = seeded["rollout"]["rollout_id"]
    args = dict(critic_updates=0, policy_updates=1, collect="bc", demo_families=["pick_place", "prep"],
                demos_per_family=1)
    service.train([rid], **args)
    plain = {ep.family: ep.steps for ep in seen[-1]}
    assert len(seen[-1]) == 2 and plain["prep"] > plain["pick_place"]  # prep's planner episode is longer
    service.train([rid], balance=True, **args)
    steps = {f: sum(ep.steps for ep in seen[-1] if ep.family == f) for f in plain}
    assert steps["prep"] == plain["prep"] and plain["prep"] <= steps["pick_place"] < plain["prep"] + plain["pick_place"]


def test_critic_round_update_uses_the_critics_own_advantages(run_dir, seeded, monkeypatch):
    """collect='critic': AWR on the given rollouts with advantage "q" (the shaped critic's Q − mean Q) for this job
    only — the configured advantage is what the checkpoint keeps; no branch rollouts."""
    import policy.awr as awr_module
    import policy.service as service_module
    from policy.checkpoint import load_checkpoint
    from policy.service import TrainerService

    monkeypatch.setattr(service_module, "branch_round", lambda *a, **k: pytest.fail("no branch rollouts for critic"))
    modes: list[str] = []
    real = awr_module.advantages
    monkeypatch.setattr(awr_module, "advantages", lambda *a, **k: (modes.append(a[4] if len(a) > 4 else k["mode"]),
                                                                    real(*a, **k))[1])
    service = TrainerService(run_dir)
    rid = seeded["rollout"]["rollout_id"]
    configured = service.require_state().train_config.advantage
    assert configured != "q"
    info = service.train([rid], potentials={rid: [0.5] * (service.episode(rid).steps + 1)}, critic_updates=2,
                         policy_updates=2, collect="critic")
    assert modes == ["q", "q"] and info["shaped_rollouts"] == 1 and "branch" not in info
    assert service.require_state().train_config.advantage == configured
    saved = load_checkpoint(service.ckpt_dir / f"{info['checkpoint']}.pt", restore_rng=False)
    assert saved.train_config.advantage == configured
    with pytest.raises(ValueError, match="collect must be one of"):
        service.train([rid], critic_updates=1, policy_updates=1, collect="mc")


async def follow(c, job_id: str, limit_s: float = 120) -> tuple[dict, list[tuple[float, float | None, str]]]:
    """wait_job until the job finished, keeping every progress notification: (final status, [(done, total, msg)])."""
    seen = []

    async def on_progress(done, total, message):
        seen.append((done, total, message))

    deadline = time.monotonic() + limit_s
    while True:
        result = await c.call_tool("wait_job", {"job_id": job_id, "timeout_s": 20}, progress_callback=on_progress)
        status = result.structured_content
        if status["state"] in ("succeeded", "failed", "cancelled", "interrupted"):
            return status, seen
        assert time.monotonic() < deadline, f"job {job_id} still {status['state']} after {limit_s} s"


def test_rollouts_and_evaluation_report_progress_per_batch_of_episodes(run_dir, seeded):
    """collect_rollouts and evaluate count finished episodes while they run, not only at start and end."""

    async def main():
        async with Client(build_server(run_dir)) as c:
            job = await ok(c, "collect_rollouts", {"scene_ids": [seeded["scene_id"]], "per_scene": 3, "tag": "p"})
            status, seen = await follow(c, job["job_id"])
            assert status["state"] == "succeeded" and len(status["result"]) == 3, status
            done = [d for d, total, _ in seen if total == 3]
            assert done == sorted(done) and {1, 2} <= set(done), seen  # one episode per pass, passes in turn

            job = await ok(c, "evaluate", {"families": ["pick_place"], "suites": ["in", "layouts"], "n": 1})
            status, seen = await follow(c, job["job_id"])
            assert status["state"] == "succeeded" and [r["suite"] for r in status["result"]] == ["in", "layouts"]
            assert (1, 2, "pick_place layouts") in seen and seen[-1][:2] == (2, 2), seen

    run(main())


def test_cancel_running_rollouts_between_episodes(run_dir, seeded):
    """A cancelled rollouts job stops after the chunk being stepped, not after all its episodes; nothing of it is
    kept and the policy is free again."""

    async def main():
        async with Client(build_server(run_dir)) as c:
            job = await ok(c, "collect_rollouts", {"scene_ids": [seeded["scene_id"]], "per_scene": 16, "tag": "c"})
            deadline = time.monotonic() + 60
            while (status := await ok(c, "get_job", {"job_id": job["job_id"]}))["done"] < 1:
                assert status["state"] in ("queued", "running") and time.monotonic() < deadline, status
                await asyncio.sleep(0.1)
            t0 = time.monotonic()
            await ok(c, "cancel_job", {"job_id": job["job_id"]})
            final, _ = await follow(c, job["job_id"], limit_s=30)
            assert final["state"] == "cancelled" and final["done"] < 16, final
            assert time.monotonic() - t0 < 5, "the job did not stop at the next chunk"
            assert not list((run_dir / "rollouts").glob("c-*")), "a cancelled job keeps no rollouts"
            assert (await ok(c, "load_checkpoint", {"tag": "base"}))["current_step"] == 0  # the policy is free

    run(main())


def test_planted_files_are_neither_followed_nor_trusted(run_dir, tmp_path):
    """Files planted in a run directory by hand (the hostile-client pass): a checkpoint or rollout symlinked from
    outside is refused, a FIFO is refused at once (not read while holding the policy), a write replaces a
    planted symlink instead of writing through it, and install_checkpoint copies only checkpoints of a sane size."""
    import torch

    from policy.checkpoint import MAX_PARAMETERS

    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copyfile(run_dir / "checkpoints" / "base.pt", outside / "real.pt")
    (run_dir / "checkpoints" / "linked.pt").symlink_to(outside / "real.pt")
    os.mkfifo(run_dir / "checkpoints" / "fifo.pt")
    (run_dir / "checkpoints" / "latest.pt.tmp").symlink_to(outside / "clobbered")
    imports = tmp_path / "imports"
    imports.mkdir()
    (imports / "notes.pt").write_text("not a checkpoint")
    payload = torch.load(run_dir / "checkpoints" / "base.pt", weights_only=True)
    payload["policy_config"] = {**payload["policy_config"], "d_model": 8192, "n_layers": 64, "ff_mult": 8}
    torch.save(payload, imports / "huge.pt")
    rid = next(p.stem for p in (run_dir / "rollouts").glob("*.json"))
    trace = run_dir / "rollouts" / f"{rid}.trace"
    shutil.move(trace, outside / "stolen.trace")
    trace.symlink_to(outside / "stolen.trace")

    async def main():
        async with Client(build_server(run_dir, import_dir=imports)) as c:
            assert "is a symlink" in await err(c, "load_checkpoint", {"tag": "linked"})
            assert "not a regular file" in await err(c, "load_checkpoint", {"tag": "fifo"})
            assert "is a symlink" in await err(c, "get_rollout_evidence", {"rollout_id": rid})
            assert (await ok(c, "load_checkpoint", {"tag": "base"}))["current_step"] is not None  # lock not held
            assert not (outside / "clobbered").exists()  # latest.pt.tmp was replaced, not written through
            assert "is not a CoDA checkpoint" in await err(c, "install_checkpoint", {"name": "notes"})
            huge = await err(c, "install_checkpoint", {"name": "huge", "tag": "big"})
            assert f"at most {MAX_PARAMETERS:.3g}" in huge
            assert not (run_dir / "checkpoints" / "big.pt").exists()

    run(main())


def test_updates_run_on_the_services_train_threads_and_simulation_keeps_the_process_count(run_dir, seeded):
    """`train_threads`: the round's updates run on that many torch threads (seen from inside the update loop, by
    its progress callback); the count is the process's again afterwards, and a service without it never changes
    it."""
    import torch

    from policy.service import TrainerService

    before = torch.get_num_threads()
    want = 2 if before != 2 else 3
    seen: list[int] = []
    service = TrainerService(run_dir, train_threads=want)
    rid, spec = seeded["rollout"]["rollout_id"], SceneStore(run_dir).spec(seeded["scene_id"])
    service.train([rid], scene_demos=[spec], critic_updates=1, policy_updates=20, collect="bc",
                  progress=lambda done, total, metrics: seen.append(torch.get_num_threads()))
    assert seen and set(seen) == {want}
    assert torch.get_num_threads() == before
    seen.clear()
    TrainerService(run_dir).train([rid], scene_demos=[spec], critic_updates=1, policy_updates=20, collect="bc",
                                  progress=lambda done, total, metrics: seen.append(torch.get_num_threads()))
    assert seen and set(seen) == {before}
