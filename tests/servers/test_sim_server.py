"""The sim server in memory: every tool, resources, limits, and errors that say what to fix."""

from __future__ import annotations

import asyncio
import base64
import io
import json

import pytest
from mcp import Client
from mcp_testing import FAULTY_PROGRAM, SCENE_PROGRAM, err, ok
from PIL import Image as PILImage

from servers.sim import build_server
from sim.scene import program_spec
from sim.spec import SceneSpec

TOOLS = {
    "list_assets": (True, False, True),
    "sdk_reference": (True, False, True),
    "create_scene": (False, False, True),
    "sample_scene": (False, False, True),
    "resample_scene": (False, False, True),
    "get_scene": (True, False, True),
    "list_scenes": (True, False, True),
    "render_scene": (True, False, True),
    "run_planner": (False, False, True),
    "sample_programs": (True, False, True),
    "vary_scene": (True, False, True),
    "domain_randomize_scene": (True, False, True),
    "scene_program": (True, False, True),
    "proxy_scene": (True, False, True),
    "variation_operators": (True, False, True),
    "scene_objects": (True, False, True),
    "scene_goals": (True, False, True),
    "program_reference": (True, False, True),
    "potential_reference": (True, False, True),
    "potential_template": (True, False, True),
    "plant_failures": (True, False, True),
}


def run(coro):
    return asyncio.run(coro)


@pytest.fixture
def server(tmp_path):
    return build_server(tmp_path)


def test_tools_and_their_annotations(server):
    async def main():
        async with Client(server) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            assert set(tools) == set(TOOLS)
            for name, (ro, destructive, idem) in TOOLS.items():
                a = tools[name].annotations
                assert (a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint) == (
                    ro, destructive, idem, False), name
                assert tools[name].description and "\n" not in tools[name].description.strip()
                for prop in tools[name].input_schema.get("properties", {}).values():
                    assert prop.get("description"), f"{name} has an argument without a description"
            assert tools["get_scene"].output_schema is not None
            assert [p.name for p in (await c.list_prompts()).prompts] == ["engine"]  # the data engine's

    run(main())


def test_assets_and_reference(server):
    async def main():
        async with Client(server) as c:
            page = await ok(c, "list_assets", {"kind": "container", "split": "train", "limit": 3})
            assert page["total"] > 3 and len(page["categories"]) == 3
            assert all(cat["container"] and cat["split"] == "train" for cat in page["categories"])
            fruit = await ok(c, "list_assets", {"tag": "fruit", "limit": 200})
            assert {cat["name"] for cat in fruit["categories"]} >= {"apple", "banana"}
            assert "valid tags" in await err(c, "list_assets", {"tag": "no-such-tag"})
            assert "limit" in await err(c, "list_assets", {"limit": 1000})
            ref = (await c.call_tool("sdk_reference", {})).content[0].text
            assert "scene.add_object" in ref and "inside(" in ref and "pick_place" in ref

    run(main())


def test_scene_lifecycle(server, tmp_path):
    async def main():
        async with Client(server) as c:
            made = await ok(c, "create_scene", {"source": SCENE_PROGRAM, "seed": 0})
            sid = made["scene_id"]
            assert made["instruction"] == "put the mug in the bowl"
            assert {o["name"] for o in made["objects"]} == {"mug", "bowl"}
            assert (tmp_path / "scenes" / f"{sid}.json").is_file() and (tmp_path / "scenes" / f"{sid}.py").is_file()
            again = await ok(c, "create_scene", {"source": SCENE_PROGRAM, "seed": 0})
            assert again["scene_id"] == sid  # idempotent: same program and seed, same scene

            detail = await ok(c, "get_scene", {"scene_id": sid})
            assert detail["spec"]["task"]["instruction"] == made["instruction"]
            assert "scene.set_task(" in detail["program"] and detail["source"] == SCENE_PROGRAM

            sampled = await ok(c, "sample_scene", {"family": "stack", "seed": 2})
            held = await ok(c, "sample_scene", {"family": "stack", "seed": 2, "split": "categories"})
            assert held["scene_id"] != sampled["scene_id"]
            varied = await ok(c, "resample_scene", {"scene_id": sampled["scene_id"], "factor": "layout", "seed": 1})
            assert varied["parent"] == sampled["scene_id"] and varied["varied"] == "layout"
            assert varied["instruction"] == sampled["instruction"]
            listed = await ok(c, "list_scenes", {"limit": 10})
            assert listed["total"] == 4

            res = await c.call_tool("render_scene", {"scene_id": sid, "cameras": ["front"], "size": 96})
            assert not res.is_error and res.content[0].mime_type == "image/png"
            png = base64.b64decode(res.content[0].data)
            assert len(png) < 1_000_000 and PILImage.open(io.BytesIO(png)).size == (96, 96)

            demo = await ok(c, "run_planner", {"scene_id": sampled["scene_id"], "save_trace": True})
            assert isinstance(demo["success"], bool) and demo["steps"] > 0 and demo["subgoals"]
            assert (tmp_path / "traces" / f"{demo['trace_id']}.npz").is_file()
            assert demo["success"]  # stack seed 2: 21 steps
            # takeover: the planner restarts exactly at a step of the recorded episode
            later = await ok(c, "run_planner", {"trace_id": demo["trace_id"], "from_step": demo["steps"] // 2})
            assert later["success"] and 0 < later["steps"] < demo["steps"]
            assert later["scene_id"] == sampled["scene_id"] and set(later["subgoals"]) <= set(demo["subgoals"])
            assert "from_step" in await err(c, "run_planner", {"trace_id": demo["trace_id"], "from_step": 9999})
            assert "exactly one" in await err(c, "run_planner", {})
            assert "exactly one" in await err(c, "run_planner", {"scene_id": sampled["scene_id"],
                                                                  "trace_id": demo["trace_id"]})

            spec = json.loads((await c.read_resource(f"sim://scenes/{sid}")).contents[0].text)
            assert spec["task"]["instruction"] == made["instruction"]
            assert "Scene API" in (await c.read_resource("sim://sdk")).contents[0].text
            assets = json.loads((await c.read_resource("sim://assets")).contents[0].text)
            assert assets["total"] == len(assets["categories"]) > 50

    run(main())


def test_errors_say_what_to_fix_and_the_server_keeps_serving(server):
    async def main():
        async with Client(server) as c:
            failed = await err(c, "create_scene", {"source": FAULTY_PROGRAM})
            assert "ZeroDivisionError" in failed and "line 6" in failed
            forbidden = await err(c, "create_scene", {"source": "import os\nscene = None\n"})
            assert "os" in forbidden
            assert "source" in await err(c, "create_scene", {"source": "x" * 100_001})  # size limit names the argument
            assert "seed" in await err(c, "create_scene", {"source": SCENE_PROGRAM, "seed": -1})
            unknown = await err(c, "get_scene", {"scene_id": "0123456789abcdef"})
            assert "unknown scene_id '0123456789abcdef'" in unknown and "sample_scene" in unknown
            assert "scene_id" in await err(c, "get_scene", {"scene_id": "../../etc/passwd"})
            assert "family" in await err(c, "sample_scene", {"family": "juggling"})
            made = await ok(c, "sample_scene", {"family": "pick_place", "seed": 0})
            assert "size" in await err(c, "render_scene", {"scene_id": made["scene_id"], "size": 4096})
            assert "cameras" in await err(c, "render_scene", {"scene_id": made["scene_id"], "cameras": ["top"]})
            assert "factor" in await err(c, "resample_scene", {"scene_id": made["scene_id"], "factor": "colour"})
            assert "scene_id" in await err(c, "get_scene", {})
            with pytest.raises(Exception, match="unknown scene_id"):
                await c.read_resource("sim://scenes/0123456789abcdef")
            assert (await ok(c, "create_scene", {"source": SCENE_PROGRAM}))["scene_id"]  # still serving

    run(main())


def test_engine_tools_make_programs_without_storing(server):
    async def main():
        async with Client(server) as c:
            (seed,) = (await ok(c, "sample_programs", {"family": "pick_place", "start_seed": 3}))["result"]
            spec = (await ok(c, "get_scene", {"scene_id": (await ok(c, "sample_scene", {
                "family": "pick_place", "seed": 3}))["scene_id"]}))["spec"]
            # the id of the scene the program builds (placements to 0.1 mm, no relation): session 36's red team found
            # 37 of 40 programs reporting the sampled spec's id instead
            assert seed["spec_hash"] == program_spec(SceneSpec.model_validate(spec)).spec_hash() and seed["seed"] == 3
            made = await ok(c, "vary_scene", {"spec": spec, "factor": "layout", "n": 2, "operators": ["rotate"]})
            assert [p["operator"] for p in made["programs"]] == ["rotate", "rotate"] and "target" in made["roles"]
            assert (await ok(c, "scene_program", {"spec": spec}))["spec_hash"] == seed["spec_hash"]
            ops = (await ok(c, "variation_operators"))
            ops = ops.get("result", ops)
            assert set(ops) == {"task", "layout", "attributes"} and "resample" in ops["layout"]
            assert "unknown layout operators ['fly']" in await err(c, "vary_scene", {
                "spec": spec, "factor": "layout", "n": 1, "operators": ["fly"]})
            assert "argument ranges.friction: Field required" in await err(c, "domain_randomize_scene", {
                "spec": spec, "ranges": {"mass": [1, 2]}, "rng_state": {}})
            source = await ok(c, "potential_template", {"spec": spec, "factor": "spatial", "phase": "approach",
                                                         "cause": "the gripper hit the bowl"})
            assert "SUBGOALS = " in source.get("result", "")
            goals = (await ok(c, "scene_goals", {"spec": spec}))["result"]
            assert goals and all(g.startswith(("inside(", "on(")) for g in goals), goals
            ref = await ok(c, "potential_reference")
            assert set(ref) == {"helpers", "tools"} and "- h.is_grasped(" in ref["helpers"]
            assert ref["tools"] == "bc, awr_shaped, reevaluate, return_to_engine"
            assert (await ok(c, "list_scenes"))["total"] == 1  # only sample_scene stored anything

    run(main())




def test_engine_tools_refuse_bad_values_naming_them(server):
    """Values that used to pass into the engine (NaN, reversed or unknown ranges, a foreign generator state,
    unknown roles or objects, a non-finite external position, an empty page) are refused, naming the argument."""
    ranges = {"mass": [0.5, 2.0], "friction": [0.3, 1.5], "scale": [0.92, 1.08], "damping": [0.5, 5.0]}

    async def main():
        async with Client(server) as c:
            spec = (await ok(c, "get_scene", {"scene_id": (await ok(c, "sample_scene", {
                "family": "pick_place", "seed": 3}))["scene_id"]}))["spec"]
            state = {"bit_generator": "PCG64", "state": {"state": 1, "inc": 1}, "has_uint32": 0, "uinteger": 0}
            dr = {"spec": spec, "ranges": ranges, "rng_state": state}
            assert (await ok(c, "domain_randomize_scene", dr))["program"]["source"]
            assert "ranges.mass[0]: Input should be a finite number" in await err(
                c, "domain_randomize_scene", {**dr, "ranges": {**ranges, "mass": ["NaN", 2.0]}})
            assert "scale: low 2 is above high 1" in await err(
                c, "domain_randomize_scene", {**dr, "ranges": {**ranges, "scale": [2.0, 1.0]}})
            assert "ranges.bogus" in await err(c, "domain_randomize_scene", {**dr, "ranges": {**ranges, "bogus": [1, 1]}})
            assert "rng_state is not a numpy PCG64" in await err(
                c, "domain_randomize_scene", {**dr, "rng_state": {**state, "state": {"state": -1, "inc": 1}}})
            # an even increment numpy accepts: inc 0 with state 0 draws 0 forever, and the bounded draws of the
            # randomization retried inside numpy until the server answered nothing more (red-team finding)
            assert "rng_state.state.inc must be odd" in await err(
                c, "domain_randomize_scene", {**dr, "rng_state": {**state, "state": {"state": 0, "inc": 0}}})
            assert (await ok(c, "list_assets", {"limit": 1}))  # and the server still answers
            assert "unknown role(s) ['nope']; valid roles: dest, mover, obstacle, target" in await err(
                c, "vary_scene", {"spec": spec, "factor": "layout", "n": 1, "roles": {"nope": "mug"}})
            assert "name(s) no object of the scene" in await err(
                c, "vary_scene", {"spec": spec, "factor": "layout", "n": 1, "roles": {"target": "no_such"}})
            assert "objects[0].pos[0]: Input should be a finite number" in await err(c, "proxy_scene", {
                "spec": spec, "objects": [{"role": "target", "pos": ["NaN", 0, 0.03], "half_extent": [0.02] * 3}]})
            assert "objects[0].half_extent[0]" in await err(c, "proxy_scene", {
                "spec": spec, "objects": [{"role": "target", "pos": [0.5, 0, 0.03], "half_extent": [-0.02] * 3}]})
            assert "start.quat" in await err(c, "proxy_scene", {
                "spec": spec, "objects": [{"role": "target", "pos": [0.5, 0, 0.03], "half_extent": [0.02] * 3}],
                "start": {"pos": [0.46, 0, 0.22], "quat": [0.7, 0.7, 0, 0]}})  # fingers sideways: beyond the tilt
            started = await ok(c, "proxy_scene", {
                "spec": spec, "objects": [{"role": "target", "pos": [0.5, 0, 0.03], "half_extent": [0.02] * 3}],
                "start": {"pos": [0.46, 0, 0.22], "quat": [0.997, 0.003, -0.075, 0.008], "opening": 0.52}})
            assert "scene.set_start(pos=(0.46, 0.0, 0.22)" in started["source"]
            assert "unknown pick_place template 'ar_open'" in await err(c, "proxy_scene", {
                "spec": spec, "objects": [{"role": "target", "pos": [0.5, 0, 0.03], "half_extent": [0.02] * 3}],
                "template": "ar_open"})
            assert "argument template" in await err(c, "proxy_scene", {
                "spec": spec, "objects": [{"role": "target", "pos": [0.5, 0, 0.03], "half_extent": [0.02] * 3}],
                "template": "Bad Template"})
            assert "argument phase" in await err(c, "potential_template", {
                "spec": spec, "factor": "spatial", "phase": "flying", "cause": "the gripper hit the bowl"})
            assert "stop (10) must be above start (50)" in await err(c, "plant_failures", {"n": 2, "start": 50,
                                                                                            "stop": 10})
            malformed = await err(c, "scene_program", {"spec": {}})
            assert "argument spec.seed: Field required" in malformed and "\n" not in malformed
            long = await err(c, "list_assets", {"tag": "x" * 100_000})
            assert len(long) < 2_200 and "characters cut" in long

    run(main())
