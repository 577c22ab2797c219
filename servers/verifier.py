"""MCP server `coda-verifier`: verify scene programs and scenes, check success predicates and Text2potential programs.
Typed tool adapters over `sim.checks.Verifier` (which wraps `sim.verify` and `sim.potential`), reading scenes and
traces from the run's `sim.scene_store.SceneStore`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from servers.common import READ_ONLY, add_completions, load_prompts, new_server, program_caller, tool
from servers.contract import MAX_JSON_CHARS, MAX_SOURCE_CHARS, MAX_TEXT_CHARS
from sim.checks import PotentialCheck, PredicateCheck, Verifier, VerifyResult
from sim.fileio import RECORD_ID_PATTERN, SCENE_ID_PATTERN
from sim.scene_store import SceneStore

INSTRUCTIONS = """Checks scenes before any rollout: verify_program runs a scene program in the sandbox and applies
every check (executes, spec_valid, compiles, scale_plausible, receptacle_capacity, graspable_target, collision_free, stable, reachable, predicate_evaluable,
predicate_satisfiable, predicate_false_at_start, optionally train_side and planner_solvable); each failed check says what to change. verify_scene checks a
stored scene (scene_id from the sim server) or a spec. check_predicate and check_potential check a success predicate
and a Text2potential program against a scene."""

SceneId = Annotated[str, Field(description="scene id (spec hash) from the sim server", pattern=SCENE_ID_PATTERN)]
Source = Annotated[str, Field(description="program source (Python)", min_length=1, max_length=MAX_SOURCE_CHARS)]
Planner = Annotated[bool, Field(description="also require the scripted planner to solve the scene (slower)")]
TrainSide = Annotated[bool, Field(description="also refuse the OOD suites' held-out items (categories, instances, "
                                               "seed layouts, task templates), as for an environment to train on")]


def checked_spec(spec: dict) -> dict:
    """A spec argument within the size limit (its validity is the verifier's first check)."""
    size = len(json.dumps(spec, default=str))
    if size > MAX_JSON_CHARS:
        raise ValueError(f"spec is {size} characters of JSON; the limit is {MAX_JSON_CHARS}")
    return spec


def build_server(run_dir: Path, robot: str | None = None) -> MCPServer:
    """The verifier server; scenes and traces are read from `run_dir` (shared with the sim server); with
    `robot`, programs and scenes are verified for that robot (the run's)."""
    verifier = Verifier(SceneStore(run_dir, robot=robot))
    mcp = new_server("coda-verifier", INSTRUCTIONS)

    @tool(mcp, READ_ONLY)
    def verify_program(
        source: Source,
        seed: Annotated[int, Field(description="value of `seed` in the program", ge=0, le=2**31 - 1)] = 0,
        planner: Planner = False,
        train_side: TrainSide = False,
        ctx: Context | None = None,
    ) -> VerifyResult:
        """Run a scene program in the sandbox and verify the scene it builds (each check, what to fix)."""
        with program_caller(ctx):
            return verifier.verify_program(source, seed, planner, train_side)

    @tool(mcp, READ_ONLY)
    def verify_scene(
        scene_id: Annotated[str | None, Field(description="a stored scene (give this or spec)",
                                              pattern=SCENE_ID_PATTERN)] = None,
        spec: Annotated[dict[str, Any] | None, Field(description="a SceneSpec JSON object, e.g. get_scene's 'spec' "
                                                     "(give this or scene_id)")] = None,
        planner: Planner = False,
        train_side: TrainSide = False,
    ) -> VerifyResult:
        """Verify a stored scene or a scene spec (each check, what to fix)."""
        if (scene_id is None) == (spec is None):
            raise ValueError("give exactly one of scene_id or spec")
        if scene_id is not None:
            return verifier.verify_scene(scene_id, planner, train_side)
        return verifier.verify_spec(checked_spec(spec), planner, train_side)

    @tool(mcp, READ_ONLY)
    def check_predicate(
        predicate: Annotated[str, Field(
            description="success predicate in SDK syntax, e.g. 'inside(mug, bowl) & ~grasped(mug)', or its JSON form",
            min_length=1, max_length=MAX_TEXT_CHARS)],
        scene_id: SceneId,
    ) -> PredicateCheck:
        """Does a predicate parse, name the scene's objects, evaluate, possibly hold, and start false?"""
        return verifier.check_predicate(predicate, scene_id)

    @tool(mcp, READ_ONLY)
    def check_potential(
        source: Source,
        scene_id: SceneId,
        trace_ids: Annotated[list[Annotated[str, Field(pattern=RECORD_ID_PATTERN)]], Field(
            description="stored rollouts (trainer rollout ids or saved trace ids) whose states the program runs on",
            max_length=16)] = [],  # noqa: B006 - pydantic copies defaults
        planner_demo: Annotated[bool, Field(
            description="also run on the scripted planner's demonstration of the scene (Φ must rise along it)")] = True,
        every: Annotated[int, Field(description="check every n-th state of each trace", ge=1, le=50)] = 1,
        ctx: Context | None = None,
    ) -> PotentialCheck:
        """Check a Text2potential program: syntax, names, and Φ on rollout states (finite, in [0, 1], fast, rising)."""
        with program_caller(ctx):
            return verifier.check_potential(source, scene_id, trace_ids, planner_demo, every)

    from sim.engine import programs

    load_prompts(mcp, only=("compiler",), defaults={"helpers": lambda: programs.potential_reference()["helpers"],
                                                    "tools": lambda: programs.potential_reference()["tools"]})
    add_completions(mcp, {"scene_id": verifier.store.ids})
    return mcp
