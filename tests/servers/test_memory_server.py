"""The memory server in memory (hashing embedder): records, clustering, search, allocation, programs, export."""

from __future__ import annotations

import asyncio
import json

import pytest
from mcp import Client
from mcp_testing import err, ok

from memory_store.embed import HashingEmbedder
from servers.memory import build_server
from sim.families import sample_spec
from sim.scene_store import SceneStore

WRITE_TOOLS = {"record_scene", "record_rollouts", "record_diagnosis", "put_generation_program", "put_training_program"}
SCENE = sample_spec("stack", 0).spec_hash()
"""the scene the `server` fixture stores in the run's scene store (diagnoses need a known scene)"""


def run(coro):
    return asyncio.run(coro)


@pytest.fixture
def server(tmp_path):
    assert SceneStore(tmp_path).sample("stack", 0).scene_id == SCENE
    return build_server(tmp_path, embedder=HashingEmbedder())


def diagnosis(i: int, cause: str, scene_id: str = SCENE, **kw) -> dict:
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
                         "get_training_programs", "memory_status", "bind_roles", "allocate_evenly"):
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
            assert (await ok(c, "record_rollouts", {"rollouts": [rollout]}))["inserted"] == 1
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
    from memory_store.service import MemoryService

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
            even = await ok(c, "allocate_evenly", {"budget": 10, "mode_ids": [b["mode_id"], a["mode_id"]]})
            first, second = sorted([a["mode_id"], b["mode_id"]])
            assert (even["novel"], even["replay"], even["targeted"]) == (2, 0, 8)  # 1.5 -> 2, as allocate_budget
            assert even["per_mode"] == {first: 4, second: 4} and not even["visits_recorded"]
            assert (await ok(c, "allocate_evenly", {"budget": 7, "mode_ids": []}))["novel"] == 7
            assert {m["id"]: m["visits"] for m in (await ok(c, "list_modes", {}))["result"]} == visits

            gen = {"id": "g1", "mode_id": a["mode_id"], "factor": "layout", "roles": ["target", "receptacle"]}
            await ok(c, "put_generation_program", {"program": gen})
            got = (await ok(c, "get_generation_programs", {"mode_id": a["mode_id"]}))["result"]
            assert [g["id"] for g in got] == ["g1"]
            assert "factor" in await err(c, "put_generation_program", {"program": {**gen, "factor": "colour"}})
            # session 36 (red team): every field within its limit still made 25 MB records, a page of them gigabytes
            huge = {**gen, "id": "g2", "variants": ["x = 1\n" * 16_000] * 5}
            assert "at most 400,000" in await err(c, "put_generation_program", {"program": huge})
            assert [g["id"] for g in (await ok(c, "get_generation_programs", {"mode_id": a["mode_id"]}))["result"]
                    ] == ["g1"]
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
            # session 36 (red team): a failed call wrote the program's evidence before it looked the mode up
            for bad in ({"mode_id": "mode-nope"}, {"mode_id": b["mode_id"]}):  # unknown; not the program's mode
                msg = await err(c, "update_learning_progress", {**bad, "before": 0.9, "after": 0.1,
                                                                "training_program_id": "t1", "updates": 7})
                assert "mode_id" in msg or "trains mode" in msg, msg
            kept = (await ok(c, "get_training_programs", {"improved": True}))["result"]
            assert [t["id"] for t in kept] == ["t1"] and kept[0]["evidence"]["updates"] == 100
            assert (await ok(c, "get_mode", {"mode_id": b["mode_id"]}))["importance"] != pytest.approx(-0.8)

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
            text = await err(c, "record_rollouts", {"rollouts": [{"id": "r1", "scene_id": "s"}]})
            assert "rollouts[0].success" in text and "rollouts[0].steps" in text and "policy_id" not in text
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
            await ok(ca, "record_scene", {"scene": {"id": "s" * 16, "family": "stack", "program": "p"}})
            assert (await ok(ca, "record_rollouts", {"rollouts": [rollout]}))["inserted"] == 1
            return await ok(cb, "memory_status", {})

    status = asyncio.run(main())
    assert status["rows"]["rollouts"] == 1 and status["store"] == str(shared)
    assert (shared / "rollouts.lance").is_dir() and not (tmp_path / "a" / "memory").exists()


HOSTILE_IDS = ["../../etc/passwd", "a' OR '1'='1", ".hidden", "a/b", "x" * 129]


def test_ids_from_clients_follow_the_documented_pattern(server, tmp_path):
    """Issue 17: record ids such as `../../etc/passwd` and `a' OR '1'='1` were stored; every id a client supplies
    (tool arguments and ids inside records) must match RECORD_ID_PATTERN, and the error names the argument."""
    rollout = {"id": "r1", "scene_id": SCENE, "policy_id": "run@r0", "success": True, "steps": 3,
               "episode_return": 1.0, "seed": 0, "phase_reached": "grasp"}

    async def main():
        async with Client(server) as c:
            mode_id = (await ok(c, "record_diagnosis", diagnosis(1, "misses the handle")))["mode_id"]
            for bad in HOSTILE_IDS:
                calls = [
                    ("record_scene", {"scene": {"id": bad, "family": "stack", "program": "p"}}, "scene.id"),
                    ("record_scene", {"scene": {"id": "s1", "family": "stack", "program": "p", "mode_id": bad}},
                     "scene.mode_id"),
                    ("record_rollouts", {"rollouts": [{**rollout, "id": bad}]}, "rollouts[0].id"),
                    ("record_rollouts", {"rollouts": [{**rollout, "scene_id": bad}]}, "rollouts[0].scene_id"),
                    ("record_rollouts", {"rollouts": [rollout, {**rollout, "id": bad}]}, "rollouts[1].id"),
                    ("record_diagnosis", diagnosis(2, "x", id=bad), "diagnosis.id"),
                    ("record_diagnosis", diagnosis(2, "x", scene_id=bad), "diagnosis.scene_id"),
                    ("record_diagnosis", diagnosis(2, "x", rollout_ids=["r1", bad]), "diagnosis.rollout_ids"),
                    ("put_generation_program", {"program": {"id": bad, "mode_id": mode_id, "factor": "layout"}},
                     "program.id"),
                    ("put_generation_program", {"program": {"id": "g1", "mode_id": mode_id, "factor": "layout",
                                                            "parent_scene_id": bad}}, "program.parent_scene_id"),
                    ("put_training_program", {"program": {"id": "t1", "mode_id": bad, "phase": "grasp"}},
                     "program.mode_id"),
                    ("get_mode", {"mode_id": bad}, "mode_id"),
                    ("set_mode_status", {"mode_id": bad, "status": "refuted"}, "mode_id"),
                    ("update_hardness", {"mode_id": bad, "successes": 1, "n": 2}, "mode_id"),
                    ("get_generation_programs", {"mode_id": bad}, "mode_id"),
                    ("get_training_programs", {"mode_id": bad}, "mode_id"),
                    ("search_diagnoses", {"query": "x", "mode_id": bad}, "mode_id"),
                    ("update_learning_progress", {"mode_id": mode_id, "before": 0.1, "after": 0.2,
                                                  "training_program_id": bad}, "training_program_id"),
                ]
                for tool_name, args, where in calls:
                    assert where in await err(c, tool_name, args), (tool_name, bad)
            status = await ok(c, "memory_status", {})
            assert status["rows"] == {"scenes": 0, "rollouts": 0, "diagnoses": 1, "modes": 1,
                                      "generation_programs": 0, "training_programs": 0}
            assert (await ok(c, "record_rollouts", {"rollouts": [rollout]}))["inserted"] == 1  # ids may hold '@'
            with pytest.raises(Exception, match="not a valid id"):
                await c.read_resource("memory://modes/a' OR '1'='1")

    run(main())


def test_non_finite_numbers_are_refused(server, tmp_path):
    """Issue 17: NaN and Infinity were stored in success_rate and episode_return and exported as `NaN`."""
    rollout = {"id": "r1", "scene_id": SCENE, "policy_id": "p0", "success": True, "steps": 3,
               "episode_return": 1.0, "seed": 0, "phase_reached": "grasp"}

    async def main():
        async with Client(server) as c:
            for bad in ("NaN", "Infinity", "-inf"):  # strings: JSON has no NaN literal, pydantic reads them as floats
                assert "rollouts[0].episode_return" in await err(
                    c, "record_rollouts", {"rollouts": [{**rollout, "episode_return": bad}]})
                assert "scene.success_rate" in await err(
                    c, "record_scene", {"scene": {"id": "s1", "family": "stack", "program": "p", "success_rate": bad}})
            assert (await ok(c, "memory_status", {}))["rows"]["rollouts"] == 0
            await ok(c, "record_rollouts", {"rollouts": [rollout]})
            await ok(c, "export_memory", {"directory": "exports/m"})

    run(main())

    def refuse(constant):
        raise AssertionError(f"non-standard JSON constant {constant} in an export")

    for path in (tmp_path / "exports" / "m").glob("*.jsonl"):
        for line in path.read_text().splitlines():
            json.loads(line, parse_constant=refuse)


def test_export_is_confined_to_a_subfolder(server, tmp_path):
    """Issue 17: export_memory accepted '.', the run directory's root; server-owned folders are refused too."""
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (tmp_path / "link").symlink_to(outside)

    async def main():
        async with Client(server) as c:
            for bad in (".", "./", "exports/..", "memory", "memory/x", "scenes", "traces/t", "jobs", "checkpoints",
                        "rollouts", "/tmp/x", "../outside", "link", "link/x", ""):
                text = await err(c, "export_memory", {"directory": bad})
                assert "directory" in text, (bad, text)
            assert (await ok(c, "export_memory", {"directory": "exports/memory"}))["directory"] == "exports/memory"
            assert (await ok(c, "export_memory", {"directory": "my-export"}))["directory"] == "my-export"
            # session 36 (red team): a folder where a file of the export goes failed after the other files were
            # written; a file on the path left the folders made before it
            (tmp_path / "blocked" / "manifest.json").mkdir(parents=True)
            (tmp_path / "afile").write_text("x")
            for bad in ("blocked", "afile", "afile/sub/x"):
                text = await err(c, "export_memory", {"directory": bad})
                assert "directory" in text, (bad, text)
            assert [p.name for p in (tmp_path / "blocked").iterdir()] == ["manifest.json"]
            (tmp_path / "blocked" / "manifest.json").rmdir()
            (tmp_path / "blocked").rmdir()
            (tmp_path / "afile").unlink()

    run(main())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exports", "link", "memory", "my-export", "scenes", "traces"]
    assert not list(outside.iterdir())


def test_role_binding_is_the_librarys(server):
    """bind_roles answers what memory_store.programs.bind_roles does, and its errors say what is wrong."""
    from memory_store.programs import bind_roles

    kitchen = [{"name": "mug_1", "role": "target", "category": "mug"},
               {"name": "bowl_2", "role": "receptacle", "category": "bowl"},
               {"name": "bowl_1", "category": "bowl", "tags": ["container"]},
               {"name": "apple", "category": "apple", "tags": ["graspable"]},
               {"name": "shelf", "role": "distractor", "category": "shelf", "tags": ["surface"]}]
    inside = [{"predicate": "inside", "roles": ["target", "receptacle"], "requires": {"receptacle": ["container"]}}]

    async def main():
        async with Client(server) as c:
            for roles, relations, n in ((["target", "receptacle"], inside, 3), (["target", "receptacle"], [], 2),
                                        (["target", "support"], [], 3), ([], [], 3), (["articulated"], [], 3)):
                got = (await ok(c, "bind_roles", {"roles": roles, "relations": relations, "objects": kitchen,
                                                  "max_bindings": n}))["result"]
                assert got == bind_roles(roles, relations, kitchen, n), (roles, relations)
            assert (await ok(c, "bind_roles", {"roles": ["target", "receptacle"], "relations": inside,
                                               "objects": kitchen}))["result"][0] == {"target": "mug_1",
                                                                                      "receptacle": "bowl_1"}
            assert "role" in await err(c, "bind_roles", {"roles": ["cup"], "objects": kitchen})
            assert "distinct" in await err(c, "bind_roles", {"roles": ["target", "target"], "objects": kitchen})
            assert "not in required roles" in await err(c, "bind_roles", {"roles": ["target"], "relations": inside,
                                                                          "objects": kitchen})
            assert "distinct non-empty 'name'" in await err(c, "bind_roles", {
                "roles": ["target"], "objects": [{"name": "a"}, {"name": "a"}]})
            assert "max_bindings" in await err(c, "bind_roles", {"roles": ["target"], "objects": kitchen,
                                                                 "max_bindings": 4})

    run(main())


def test_record_scene_fills_family_and_program_from_the_stored_scene(tmp_path):
    """A scene the sim server stored needs only its id (as prompts/round.md records it); any other scene must name
    its family and program, and is refused without them."""
    from memory_store.store import MemoryStore
    from sim.scene import to_program

    stored = SceneStore(tmp_path).sample("stack", 2)

    async def main():
        async with Client(build_server(tmp_path, embedder=HashingEmbedder())) as c:
            await ok(c, "record_scene", {"scene": {"id": stored.scene_id, "verified": True}})
            message = await err(c, "record_scene", {"scene": {"id": "0123456789abcdef"}})
            assert "not in the run's scene store" in message and "family and program" in message
            await ok(c, "record_scene", {"scene": {"id": "0123456789abcdef", "family": "stack", "program": "x = 1"}})

    run(main())
    store = MemoryStore.open(tmp_path / "memory", embedder=HashingEmbedder())
    got, other = store.get("scenes", stored.scene_id), store.get("scenes", "0123456789abcdef")
    spec = SceneStore(tmp_path).spec(stored.scene_id)
    assert (got.family, got.program, got.spec_hash) == ("stack", to_program(spec), stored.scene_id)
    assert other.program == "x = 1"


def test_record_rollouts_stores_collect_rollouts_rows_as_they_are(server, tmp_path):
    """A row of the trainer's collect_rollouts result (rollout_id, scene_id, success, steps) is a rollout record;
    the fields it lacks get their documented defaults, derived from what is given."""
    from memory_store.store import MemoryStore

    rows = [{"rollout_id": "r0-0-7-0000-abcd1234", "scene_id": SCENE, "success": True, "steps": 41},
            {"rollout_id": "r0-0-7-0001-abcd1234", "scene_id": SCENE, "success": False, "steps": 120}]

    async def main():
        async with Client(server) as c:
            await ok(c, "record_rollouts", {"rollouts": [{**rows[0], "run_id": "run", "round": 2}, rows[1]]})
            given = {"id": "r9", "scene_id": SCENE, "success": False, "steps": 5, "policy_id": "p", "seed": 3,
                     "episode_return": 0.25, "phase_reached": "lift"}
            await ok(c, "record_rollouts", {"rollouts": [given]})
            assert "rollouts[0]" in await err(c, "record_rollouts", {"rollouts": [{**rows[0], "id": "other"}]})

    run(main())
    store = MemoryStore.open(tmp_path / "memory", embedder=HashingEmbedder())
    won, lost, given = (store.get("rollouts", i) for i in ("r0-0-7-0000-abcd1234", "r0-0-7-0001-abcd1234", "r9"))
    assert (won.policy_id, won.episode_return, won.seed, won.phase_reached) == ("run@r2", 1.0, None, "other")
    assert (lost.policy_id, lost.episode_return, lost.steps) == ("", 0.0, 120)
    assert (given.policy_id, given.episode_return, given.seed, given.phase_reached) == ("p", 0.25, 3, "lift")


def test_record_diagnosis_refuses_an_unknown_scene(server):
    """A diagnosis must be of a scene the run knows (recorded in memory or stored by the sim server); an unknown
    scene_id is an error naming the argument, and no mode is created for it."""

    async def main():
        async with Client(server) as c:
            message = await err(c, "record_diagnosis", diagnosis(1, "misses the handle", scene_id="nowhere"))
            assert "diagnosis.scene_id" in message and "'nowhere'" in message and "record_scene" in message
            assert (await ok(c, "memory_status", {}))["rows"]["modes"] == 0
            await ok(c, "record_scene", {"scene": {"id": "mine", "family": "stack", "program": "p"}})
            assert (await ok(c, "record_diagnosis", diagnosis(2, "misses the handle", scene_id="mine")))["created_mode"]
            assert (await ok(c, "record_diagnosis", diagnosis(3, "drops the cup", phase="lift")))["created_mode"]
            assert (await ok(c, "memory_status", {}))["rows"]["modes"] == 2

    run(main())


# --- hostile arguments: refused with the argument named, nothing stored, no internal errors -------------------

EMPTY = {"scenes": 0, "rollouts": 0, "diagnoses": 0, "modes": 0, "generation_programs": 0, "training_programs": 0}
ROLLOUT = {"id": "r1", "scene_id": SCENE, "success": False, "steps": 3}
BIG = "x" * 1_000_000


async def rows(c) -> dict:
    return (await ok(c, "memory_status", {}))["rows"]


async def refused(c, tool_name: str, args: dict, *named: str) -> str:
    """The call fails with a one-line message naming `named` that is not an internal error."""
    message = await err(c, tool_name, args)
    assert "internal error" not in message and "\n" not in message, message
    for part in named:
        assert part in message, (part, message[:300])
    return message


def test_integers_beyond_int64_are_refused_with_their_bounds(server):
    """Hostile pass: 10**30 in an integer field reached pyarrow's int64 column: 'internal error (OverflowError)'."""
    huge = 10**30
    scene = {"id": "s1", "family": "stack", "program": "p"}

    async def main():
        async with Client(server) as c:
            for field in ("n_rollouts", "round"):
                await refused(c, "record_scene", {"scene": {**scene, field: huge}}, f"scene.{field}", "less than")
            for field in ("steps", "seed", "round"):
                await refused(c, "record_rollouts", {"rollouts": [{**ROLLOUT, field: huge}]}, f"rollouts[0].{field}",
                              "less than")
            await refused(c, "record_diagnosis", diagnosis(1, "misses the handle", round=huge), "diagnosis.round")
            assert await rows(c) == EMPTY
            mode_id = (await ok(c, "record_diagnosis", diagnosis(1, "misses the handle")))["mode_id"]
            for args in ({"n": huge, "successes": 1}, {"n": 4, "successes": huge}, {"n": 4, "successes": 1,
                                                                                    "round": huge}):
                await refused(c, "update_hardness", {"mode_id": mode_id, **args}, "less than")
            await refused(c, "allocate_budget", {"budget": 8, "round": huge}, "argument round")
            await refused(c, "update_learning_progress", {"mode_id": mode_id, "before": 0.1, "after": 0.2,
                                                          "updates": huge}, "argument updates")
            mode = await ok(c, "get_mode", {"mode_id": mode_id})
            assert (mode["hardness"], mode["visits"], mode["importance"]) == (None, 0, 0.0)
            assert [e["event"] for e in mode["history"]] == ["created"]
            # the largest recorded seed is the int64 column's maximum
            assert (await ok(c, "record_rollouts", {"rollouts": [{**ROLLOUT, "seed": 2**63 - 1}]}))["inserted"] == 1

    run(main())


def test_unknown_keys_in_nested_records_are_refused(server):
    """Hostile pass: diagnosis.phse, diagnosis.mode_id and diagnosis.embedding were dropped without a word; the
    embedding and the mode are the server's to compute."""

    async def main():
        async with Client(server) as c:
            for key, value in (("phse", "lift"), ("mode_id", "forced"), ("embedding", [0.1] * 384)):
                await refused(c, "record_diagnosis", diagnosis(1, "misses the handle", **{key: value}),
                              f"diagnosis.{key}", "Extra inputs are not permitted")
            await refused(c, "record_diagnosis", diagnosis(1, "x", evidence={"step_index": [3]}),
                          "diagnosis.evidence.step_index")
            await refused(c, "record_scene", {"scene": {"id": "s1", "family": "stack", "program": "p",
                                                        "violations": [{"check": "c", "message": "m", "why": "?"}]}},
                          "scene.violations[0].why")
            assert await rows(c) == EMPTY

    run(main())


def test_rates_counts_and_rounds_out_of_range_are_refused(server):
    """Hostile pass: success_rate=-1, n_rollouts=-5, round=-3, success_on_variants=1e30 and n=10**9 were stored."""

    async def main():
        async with Client(server) as c:
            text = await refused(c, "record_scene", {"scene": {"id": "s1", "family": "stack", "program": "p",
                                                               "success_rate": -1, "n_rollouts": -5, "round": -3}},
                                 "scene.success_rate", "scene.n_rollouts", "scene.round")
            assert "greater than or equal to 0" in text
            await refused(c, "record_scene", {"scene": {"id": "s1", "family": "stack", "program": "p",
                                                        "success_rate": 1.5}}, "scene.success_rate")
            await refused(c, "record_rollouts", {"rollouts": [{**ROLLOUT, "seed": -1}]}, "rollouts[0].seed")
            assert await rows(c) == EMPTY
            mode_id = (await ok(c, "record_diagnosis", diagnosis(1, "misses the handle")))["mode_id"]
            await refused(c, "put_generation_program", {"program": {"id": "g1", "mode_id": mode_id, "factor": "layout",
                                                                    "success_on_variants": 1e30}},
                          "program.success_on_variants", "less than or equal to 1")
            await refused(c, "update_hardness", {"mode_id": mode_id, "successes": 1, "n": 10**9}, "argument n")
            assert (await ok(c, "get_mode", {"mode_id": mode_id}))["hardness"] is None
            assert (await rows(c))["generation_programs"] == 0
            # an unknown value is named shortly: a megabyte of it is no help in a one-line error
            assert len(await refused(c, "record_diagnosis", diagnosis(2, "x", factor=BIG), "diagnosis.factor")) < 600

    run(main())


def test_programs_of_an_unknown_mode_are_refused(server):
    """Hostile pass: put_generation_program and put_training_program stored orphans of mode 'no_such_mode'."""

    async def main():
        async with Client(server) as c:
            gen = {"id": "g1", "mode_id": "no_such_mode", "factor": "layout"}
            train = {"id": "t1", "mode_id": "no_such_mode", "phase": "grasp"}
            await refused(c, "put_generation_program", {"program": gen}, "program.mode_id", "'no_such_mode'",
                          "list_modes")
            await refused(c, "put_training_program", {"program": train}, "program.mode_id", "'no_such_mode'")
            assert await rows(c) == EMPTY
            mode_id = (await ok(c, "record_diagnosis", diagnosis(1, "misses the handle")))["mode_id"]
            await ok(c, "put_generation_program", {"program": {**gen, "mode_id": mode_id}})
            await ok(c, "put_training_program", {"program": {**train, "mode_id": mode_id}})

    run(main())


def test_size_limits_of_the_contract_apply_inside_records(server):
    """Hostile pass: a 1 MB potential_code, parent_program, spec_json, run_id, policy_id or summary and 100,000-item
    variants or subgoals were stored."""
    from servers.contract import MAX_ITEMS, MAX_JSON_CHARS, MAX_SOURCE_CHARS

    scene = {"id": "s1", "family": "stack", "program": "p"}

    async def main():
        async with Client(server) as c:
            mode_id = (await ok(c, "record_diagnosis", diagnosis(1, "misses the handle")))["mode_id"]
            gen = {"id": "g1", "mode_id": mode_id, "factor": "layout"}
            train = {"id": "t1", "mode_id": mode_id, "phase": "grasp"}
            calls = [
                ("put_training_program", {"program": {**train, "potential_code": BIG}}, "program.potential_code"),
                ("put_training_program", {"program": {**train, "subgoals": ["s"] * 100_000}}, "program.subgoals"),
                ("put_training_program", {"program": {**train, "evidence": {"x": BIG}}}, "program.evidence"),
                ("put_generation_program", {"program": {**gen, "parent_program": BIG}}, "program.parent_program"),
                ("put_generation_program", {"program": {**gen, "variants": ["v"] * 100_000}}, "program.variants"),
                ("put_generation_program", {"program": {**gen, "run_id": BIG}}, "program.run_id"),
                ("record_scene", {"scene": {**scene, "spec_json": BIG}}, "scene.spec_json"),
                ("record_scene", {"scene": {**scene, "run_id": BIG}}, "scene.run_id"),
                ("record_rollouts", {"rollouts": [{**ROLLOUT, "policy_id": BIG}]}, "rollouts[0].policy_id"),
                ("record_rollouts", {"rollouts": [{**ROLLOUT, "summary": {"x": BIG}}]}, "rollouts[0].summary"),
                ("record_diagnosis", diagnosis(2, "x", run_id=BIG), "diagnosis.run_id"),
                ("record_diagnosis", diagnosis(2, "x", evidence={"state_facts": [BIG]}),
                 "diagnosis.evidence.state_facts[0]"),
            ]
            for tool_name, args, where in calls:
                await refused(c, tool_name, args, where)
            assert await rows(c) == {**EMPTY, "diagnoses": 1, "modes": 1}
            # at the limits: stored
            await ok(c, "put_training_program", {"program": {**train, "potential_code": "#" * MAX_SOURCE_CHARS,
                                                             "subgoals": ["s"] * MAX_ITEMS}})
            await ok(c, "record_rollouts", {"rollouts": [{**ROLLOUT, "summary": {"x": "y" * (MAX_JSON_CHARS - 20)}}]})

    run(main())


def test_record_rollouts_refuses_repeated_ids_and_unknown_scenes(server):
    """Hostile pass: [r1, r1] in one call was accepted (1 inserted) and a rollout of a scene nobody knows was
    stored. Either refuses the whole call, naming the rollouts; known scenes are the sim server's or recorded."""

    async def main():
        async with Client(server) as c:
            await refused(c, "record_rollouts", {"rollouts": [ROLLOUT, {**ROLLOUT, "success": True}]},
                          "rollouts[1].id", "'r1'", "rollouts[0]")
            await refused(c, "record_rollouts", {"rollouts": [ROLLOUT, {**ROLLOUT, "id": "r2", "scene_id": "nowhere"}]},
                          "rollouts[1].scene_id", "'nowhere'", "record_scene")
            assert await rows(c) == EMPTY
            await ok(c, "record_scene", {"scene": {"id": "mine", "family": "stack", "program": "p"}})
            written = await ok(c, "record_rollouts", {"rollouts": [ROLLOUT, {**ROLLOUT, "id": "r2", "scene_id": "mine"}]})
            assert (written["inserted"], written["ids"]) == (2, ["r1", "r2"])

    run(main())


def test_update_hardness_refuses_an_inverted_band_as_allocate_budget_does(server):
    """Hostile pass: update_hardness took band_low=0.9, band_high=0.1 (allocate_budget refuses it)."""

    async def main():
        async with Client(server) as c:
            mode_id = (await ok(c, "record_diagnosis", diagnosis(1, "misses the handle")))["mode_id"]
            inverted = {"band_low": 0.9, "band_high": 0.1}
            hardness = await refused(c, "update_hardness", {"mode_id": mode_id, "successes": 1, "n": 4, **inverted},
                                     "band_low must not exceed band_high")
            allocation = await refused(c, "allocate_budget", {"budget": 8, **inverted})
            assert hardness.split(": ", 1)[1] == allocation.split(": ", 1)[1]  # the same check, the same words
            mode = await ok(c, "get_mode", {"mode_id": mode_id})
            assert mode["hardness"] is None and [e["event"] for e in mode["history"]] == ["created"]

    run(main())
