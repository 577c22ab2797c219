"""The memory server in memory (hashing embedder): records, clustering, search, allocation, programs, export."""

from __future__ import annotations

import asyncio
import json

import pytest
from mcp import Client
from mcp_testing import err, ok

from memory_store.embed import HashingEmbedder
from servers.memory import build_server
from servers.scenes import SceneStore

WRITE_TOOLS = {"record_scene", "record_rollout", "record_rollouts", "record_diagnosis", "put_generation_program",
               "put_training_program"}


def run(coro):
    return asyncio.run(coro)


@pytest.fixture
def server(tmp_path):
    return build_server(tmp_path, embedder=HashingEmbedder())


def diagnosis(i: int, cause: str, scene_id: str = "s1", **kw) -> dict:
    return {"diagnosis": {"id": f"d{i}", "scene_id": scene_id, "factor": "spatial", "phase": "grasp",
                          "cause": cause, "round": 1, **kw}}


def test_annotations(server):
    async def main():
        async with Client(server) as c:
            tools = {t.name: t.annotations for t in (await c.list_tools()).tools}
            for name in WRITE_TOOLS:
                assert not tools[name].read_only_hint and tools[name].idempotent_hint, name
            for name in ("allocate_budget", "update_learning_progress", "update_hardness"):
                assert not tools[name].idempotent_hint and not tools[name].destructive_hint, name
            for name in ("set_mode_status", "export_memory"):
                assert tools[name].destructive_hint, name
            for name in ("search_diagnoses", "list_modes", "get_mode", "get_generation_programs",
                         "get_training_programs", "memory_status"):
                assert tools[name].read_only_hint, name
            assert all(a.open_world_hint is False for a in tools.values())

    run(main())


def test_records_modes_and_search(server, tmp_path):
    scene_id = SceneStore(tmp_path).sample("pick_place", 0).scene_id

    async def main():
        async with Client(server) as c:
            w = await ok(c, "record_scene", {"scene": {"id": scene_id, "family": "pick_place", "program": "..."}})
            assert w["inserted"] == 1 and w["table"] == "scenes"
            again = await ok(c, "record_scene", {"scene": {"id": scene_id, "family": "pick_place", "program": "..."}})
            assert again["inserted"] == 0 and again["updated"] == 1
            rollout = {"id": "r1", "scene_id": scene_id, "policy_id": "p0", "success": False, "steps": 80,
                       "episode_return": 0.0, "seed": 0, "phase_reached": "grasp"}
            assert (await ok(c, "record_rollout", {"rollout": rollout}))["inserted"] == 1
            batch = [{**rollout, "id": f"r{i}", "success": i % 2 == 0} for i in range(2, 6)]
            assert (await ok(c, "record_rollouts", {"rollouts": batch}))["inserted"] == 4

            first = await ok(c, "record_diagnosis", diagnosis(1, "the gripper closes before reaching the mug handle",
                                                               scene_id, rollout_ids=["r1"]))
            assert first["created_mode"] and first["mode"]["members"] == 1
            same = await ok(c, "record_diagnosis", diagnosis(2, "the gripper closes before reaching the mug handle "
                                                                "again", scene_id))
            assert not same["created_mode"] and same["mode_id"] == first["mode_id"]
            other = await ok(c, "record_diagnosis", {"diagnosis": {**diagnosis(3, "the bowl tips over")["diagnosis"],
                                                                   "factor": "attribute", "phase": "place"}})
            assert other["created_mode"] and other["mode_id"] != first["mode_id"]
            replay = await ok(c, "record_diagnosis", diagnosis(1, "the gripper closes before reaching the mug handle",
                                                                scene_id))
            assert replay["mode"]["members"] == 2  # recording d1 again changed nothing

            hits = (await ok(c, "search_diagnoses", {"query": "gripper closes early", "k": 2}))["result"]
            assert hits[0]["diagnosis"]["id"] in ("d1", "d2") and "embedding" not in hits[0]["diagnosis"]
            only = (await ok(c, "search_diagnoses", {"query": "tips", "factor": "attribute"}))["result"]
            assert [h["diagnosis"]["id"] for h in only] == ["d3"]

            modes = (await ok(c, "list_modes", {}))["result"]
            assert len(modes) == 2 and "centroid" not in modes[0]
            mode_id = first["mode_id"]
            detail = await ok(c, "get_mode", {"mode_id": mode_id})
            assert set(detail["diagnoses"]) == {"d1", "d2"} and detail["history"][0]["event"] == "created"

            # hardness from the stored rollouts of the mode's scenes
            await ok(c, "record_scene", {"scene": {"id": scene_id, "family": "pick_place", "program": "...",
                                                   "mode_id": mode_id}})
            hard = await ok(c, "update_hardness", {"mode_id": mode_id})
            assert hard["hardness"] == pytest.approx(2 / 5) and hard["hardness_n"] == 5
            assert (await ok(c, "update_hardness", {"mode_id": mode_id, "successes": 0, "n": 10}))["in_band"] is False
            assert "both" in await err(c, "update_hardness", {"mode_id": mode_id, "successes": 1})

            status = await ok(c, "memory_status", {})
            assert status["rows"]["diagnoses"] == 3 and status["rows"]["rollouts"] == 5
            stored = status["rows"]["scenes"]
            assert stored == 1

            modes_json = json.loads((await c.read_resource("memory://modes")).contents[0].text)
            assert len(modes_json) == 2
            one = json.loads((await c.read_resource(f"memory://modes/{mode_id}")).contents[0].text)
            assert one["id"] == mode_id

    run(main())


def test_scene_spec_filled_from_the_run(server, tmp_path):
    scene_id = SceneStore(tmp_path).sample("stack", 1).scene_id

    async def main():
        async with Client(server) as c:
            await ok(c, "record_scene", {"scene": {"id": scene_id, "family": "stack", "program": "p"}})
        return server

    run(main())
    from servers.memory_ops import MemoryService

    rec = MemoryService(tmp_path, HashingEmbedder()).store.get("scenes", scene_id)
    assert rec.spec_hash == scene_id and json.loads(rec.spec_json)["family"] == "stack"


def test_allocation_programs_progress_status_export(server, tmp_path):
    async def main():
        async with Client(server) as c:
            a = await ok(c, "record_diagnosis", diagnosis(1, "misses the handle"))
            b = await ok(c, "record_diagnosis", {"diagnosis": {**diagnosis(2, "drops the cup")["diagnosis"],
                                                               "phase": "transport"}})
            preview = await ok(c, "allocate_budget", {"budget": 64, "record_visits": False})
            assert (preview["novel"], preview["replay"], preview["targeted"]) == (16, 0, 48)  # no replayable modes
            assert sum(preview["per_mode"].values()) == 48 and not preview["visits_recorded"]
            plan = await ok(c, "allocate_budget", {"budget": 64, "round": 1})
            visits = {m["id"]: m["visits"] for m in (await ok(c, "list_modes", {}))["result"]}
            assert visits == plan["per_mode"]
            assert "band" in await err(c, "allocate_budget", {"budget": 8, "band_low": 0.9, "band_high": 0.1})
            assert "budget" in await err(c, "allocate_budget", {"budget": -1})

            gen = {"id": "g1", "mode_id": a["mode_id"], "factor": "layout", "roles": ["target", "receptacle"]}
            await ok(c, "put_generation_program", {"program": gen})
            got = (await ok(c, "get_generation_programs", {"mode_id": a["mode_id"]}))["result"]
            assert [g["id"] for g in got] == ["g1"]
            assert "factor" in await err(c, "put_generation_program", {"program": {**gen, "factor": "colour"}})
            train = {"id": "t1", "mode_id": a["mode_id"], "phase": "grasp", "subgoals": ["reach", "grasp"]}
            await ok(c, "put_training_program", {"program": train})

            lp = await ok(c, "update_learning_progress", {"mode_id": a["mode_id"], "before": 0.2, "after": 0.5,
                                                          "training_program_id": "t1", "updates": 100})
            assert lp["importance"] == pytest.approx(0.3)
            improved = (await ok(c, "get_training_programs", {"improved": True}))["result"]
            assert [t["id"] for t in improved] == ["t1"] and improved[0]["evidence"]["updates"] == 100
            assert "unknown training_program_id" in await err(
                c, "update_learning_progress", {"mode_id": a["mode_id"], "before": 0, "after": 1,
                                                "training_program_id": "nope"})
            assert "after" in await err(c, "update_learning_progress", {"mode_id": a["mode_id"], "before": 0,
                                                                        "after": 2})

            refuted = await ok(c, "set_mode_status", {"mode_id": b["mode_id"], "status": "refuted",
                                                      "reason": "control as hard"})
            assert refuted["status"] == "refuted"
            assert "list_modes" in await err(c, "get_mode", {"mode_id": "mode-nope"})
            assert "status" in await err(c, "set_mode_status", {"mode_id": b["mode_id"], "status": "great"})

            exported = await ok(c, "export_memory", {"directory": "exports/m1"})
            assert exported["rows"]["modes"] == 2 and (tmp_path / "exports/m1/manifest.json").is_file()
            for bad in ("/tmp/x", "../outside", "memory/inside"):
                assert "directory" in await err(c, "export_memory", {"directory": bad})
            assert not (tmp_path.parent / "outside").exists()

    run(main())


def test_malformed_records_name_the_field(server):
    async def main():
        async with Client(server) as c:
            text = await err(c, "record_rollout", {"rollout": {"id": "r1", "scene_id": "s"}})
            assert "rollout.policy_id" in text and "rollout.success" in text
            text = await err(c, "record_diagnosis", diagnosis(1, "x", factor="mood"))
            assert "diagnosis.factor" in text and "spatial" in text
            assert "k" in await err(c, "search_diagnoses", {"query": "x", "k": 1000})
            assert "rollouts" in await err(c, "record_rollouts", {"rollouts": []})
            assert (await ok(c, "memory_status", {}))["rows"]["rollouts"] == 0  # still serving, nothing written

    run(main())


def test_servers_of_two_run_dirs_share_one_memory_uri(tmp_path):
    """Machines of a cluster point their memory servers at one LanceDB URI (here a shared directory)."""
    shared = tmp_path / "shared-memory"
    a = build_server(tmp_path / "a", embedder=HashingEmbedder(), memory_uri=str(shared))
    b = build_server(tmp_path / "b", embedder=HashingEmbedder(), memory_uri=str(shared))
    rollout = {"id": "r1", "scene_id": "s" * 16, "policy_id": "p0", "success": True, "steps": 20,
               "episode_return": 1.0, "seed": 0, "phase_reached": "release"}

    async def main():
        async with Client(a) as ca, Client(b) as cb:
            assert (await ok(ca, "record_rollout", {"rollout": rollout}))["inserted"] == 1
            return await ok(cb, "memory_status", {})

    status = asyncio.run(main())
    assert status["rows"]["rollouts"] == 1 and status["store"] == str(shared)
    assert (shared / "rollouts.lance").is_dir() and not (tmp_path / "a" / "memory").exists()
