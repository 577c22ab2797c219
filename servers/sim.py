"""MCP server `coda-sim`: assets, the SDK reference, scenes from programs or families, resampling, rendering, the
scripted planner. Typed tool adapters over the run's scene store `sim.scene_store.SceneStore`, the asset listing
`sim.assets.listing` and the SDK reference `sim.reference`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, Image, MCPServer
from pydantic import Field, ValidationError

from servers.common import (
    READ_ONLY,
    WRITES_IDEMPOTENT,
    add_completions,
    argument_errors,
    image_content,
    load_prompts,
    new_server,
    program_caller,
    resource,
    to_json,
    tool,
)
from servers.contract import (
    MAX_IMAGE_PX,
    MAX_JSON_CHARS,
    MAX_PAGE,
    MAX_SOURCE_CHARS,
    MAX_TEXT_CHARS,
    MAX_VERIFICATIONS,
)
from sim import reference
from sim.assets import listing
from sim.assets.listing import AssetPage
from sim.constants import MAX_OBJECTS, PhaseName
from sim.constants import FamilyName as Family
from sim.engine import planted, programs
from sim.engine.proxy import ExternalObject
from sim.engine.proxy import proxy_scene as external_proxy
from sim.fileio import SCENE_ID_PATTERN
from sim.scene_store import SPLIT_HELP, DemoSummary, SceneDetail, SceneInfo, ScenePage, SceneStore, SplitName
from sim.spec import RobotStart, SceneSpec

INSTRUCTIONS = """Simulated tabletop scenes for robot learning (MuJoCo). Read `sdk_reference` (or sim://sdk) first.
Make scenes with create_scene (a scene program), sample_scene (a task family's seed scene) or resample_scene (redraw
one factor of a stored scene); each returns a scene_id (the spec hash) used by every other scene tool and by the
verifier, memory and trainer servers sharing this run directory."""

SceneId = Annotated[str, Field(description="scene id (spec hash) from create_scene / sample_scene", pattern=SCENE_ID_PATTERN)]
Seed = Annotated[int, Field(description="random seed (the program's `seed`)", ge=0, le=2**31 - 1)]

SpecJson = Annotated[dict[str, Any], Field(description="a SceneSpec JSON object, e.g. get_scene's 'spec'")]
SceneFactor = Annotated[Literal["task", "layout", "attributes"], Field(description="scene factor to vary")]


def spec_of(spec: dict) -> SceneSpec:
    """A spec argument within the size limit, validated."""
    size = len(json.dumps(spec, default=str))
    if size > MAX_JSON_CHARS:
        raise ValueError(f"spec is {size} characters of JSON; the limit is {MAX_JSON_CHARS}")
    try:
        return SceneSpec.model_validate(spec)
    except ValidationError as exc:
        raise ValueError(argument_errors(exc, prefix="spec")) from None


def build_server(run_dir: Path, robot: str | None = None) -> MCPServer:
    """The sim server over the scenes of `run_dir`; with `robot`, every scene it stores is made for that robot."""
    store = SceneStore(run_dir, robot=robot)
    mcp = new_server("coda-sim", INSTRUCTIONS)

    @tool(mcp, READ_ONLY)
    def list_assets(
        tag: Annotated[str | None, Field(description="only categories with this tag, e.g. 'fruit', 'kitchen'")] = None,
        split: Annotated[Literal["train", "heldout"] | None, Field(description="only this side of the split")] = None,
        kind: Annotated[
            Literal["any", "graspable", "container", "surface", "articulated"], Field(description="only this kind")
        ] = "any",
        offset: Annotated[int, Field(description="first item of the page", ge=0)] = 0,
        limit: Annotated[int, Field(description="items per page", ge=1, le=MAX_PAGE)] = 50,
    ) -> AssetPage:
        """Asset categories with instance counts, kind, size and split (paged)."""
        return listing.list_assets(tag, split, kind, offset, limit)

    @tool(mcp, READ_ONLY, title="SDK reference")
    def sdk_reference() -> str:
        """The scene-program API, the predicate language and the category vocabulary (markdown)."""
        return reference.sdk_reference()

    @tool(mcp, WRITES_IDEMPOTENT)
    def create_scene(
        source: Annotated[str, Field(description="scene program (Python using `from sim import ...`)",
                                     min_length=1, max_length=MAX_SOURCE_CHARS)],
        seed: Seed = 0,
        ctx: Context | None = None,
    ) -> SceneInfo:
        """Run a scene program in the sandbox and store the scene it builds."""
        with program_caller(ctx):
            return store.create(source, seed)

    @tool(mcp, WRITES_IDEMPOTENT)
    def sample_scene(
        family: Annotated[Family, Field(description="task family")],
        seed: Seed = 0,
        split: Annotated[SplitName, Field(description=SPLIT_HELP)] = "train",
    ) -> SceneInfo:
        """Store the seed scene of a task family for a seed."""
        return store.sample(family, seed, split)

    @tool(mcp, WRITES_IDEMPOTENT)
    def resample_scene(
        scene_id: SceneId,
        factor: Annotated[Literal["task", "layout", "attributes"], Field(description="scene factor to redraw")],
        seed: Seed = 0,
        split: Annotated[Literal["train", "heldout"], Field(description="side of the split to draw from")] = "train",
    ) -> SceneInfo:
        """Store a copy of a scene with one factor redrawn and the other two kept."""
        return store.resample(scene_id, factor, seed, split)

    @tool(mcp, READ_ONLY)
    def get_scene(scene_id: SceneId) -> SceneDetail:
        """A stored scene's spec JSON and a program that rebuilds it."""
        return store.detail(scene_id)

    @tool(mcp, READ_ONLY)
    def list_scenes(
        offset: Annotated[int, Field(description="first item of the page", ge=0)] = 0,
        limit: Annotated[int, Field(description="items per page", ge=1, le=MAX_PAGE)] = 50,
    ) -> ScenePage:
        """Stored scenes of this run, newest first (paged)."""
        return store.list(offset, limit)

    @tool(mcp, READ_ONLY)
    def render_scene(
        scene_id: SceneId,
        cameras: Annotated[
            list[Literal["front", "side"]], Field(description="cameras, side by side", min_length=1, max_length=2)
        ] = ["front", "side"],  # noqa: B006 - pydantic copies defaults
        size: Annotated[int, Field(description="pixels per camera side", ge=32, le=MAX_IMAGE_PX)
                        ] = 256,
    ) -> Image:
        """Render a scene at rest to an image (PNG, under 1 MB)."""
        return image_content(store.render_png(scene_id, list(cameras), size))

    @tool(mcp, WRITES_IDEMPOTENT)
    def run_planner(
        scene_id: Annotated[str | None, Field(description="scene to plan from reset (or give trace_id)",
                                              pattern=SCENE_ID_PATTERN)] = None,
        save_trace: Annotated[bool, Field(description="save the demonstration as traces/planner-<scene_id>.npz")] = False,
        trace_id: Annotated[str | None, Field(description="takeover: a stored trace (a rollout id or a saved "
                                                          "trace) to restore exactly at from_step")] = None,
        from_step: Annotated[int, Field(description="takeover: the trace's step to start from (0 = reset)", ge=0,
                                        le=10_000)] = 0,
        budget: Annotated[int | None, Field(description="takeover: control steps the planner gets (default: the "
                                                        "episode length)", ge=1, le=400)] = None,
    ) -> DemoSummary:
        """Run the scripted planner on a scene: success, steps and subgoals of the demonstration. With trace_id,
        take over a recorded episode at from_step instead (subgoals that already hold are skipped)."""
        if (scene_id is None) == (trace_id is None):
            raise ValueError("give exactly one of scene_id (plan from reset) or trace_id (take over a trace)")
        if trace_id is not None:
            if save_trace:
                raise ValueError("save_trace applies to scene_id plans only")
            return store.run_planner_from(trace_id, from_step, budget)
        return store.run_planner(scene_id, save_trace)

    @tool(mcp, READ_ONLY)
    def sample_programs(
        family: Annotated[Family, Field(description="task family")],
        n: Annotated[int, Field(description="programs wanted (seeds start_seed, start_seed + 1, ...)", ge=1, le=MAX_PAGE)] = 1,
        start_seed: Seed = 0,
        split: Annotated[SplitName, Field(description=SPLIT_HELP)] = "train",
    ) -> list[programs.SceneProgram]:
        """Scene programs of a task family's seed scenes (nothing is stored; run them with create_scene)."""
        return programs.sample_programs(family, n, start_seed, split)

    @tool(mcp, READ_ONLY)
    def vary_scene(
        spec: SpecJson,
        factor: SceneFactor,
        n: Annotated[int, Field(description="variants wanted (variant i draws from the generator [seed, i])", ge=1, le=MAX_PAGE)],
        seed: Seed = 0,
        operators: Annotated[list[str], Field(description="operators of the factor to try, in order (see variation_operators; "
                                              "also the counterfactuals declutter (layout) and nominal (attributes), "
                                              "which take a suspected cause away)",
                                              min_length=1, max_length=16)] = ["resample"],  # noqa: B006 - pydantic copies defaults
        roles: Annotated[dict[str, str], Field(description="objects to act on by role (target, dest, obstacle, mover); "
                                               "the scene's defaults fill the rest", max_length=8)] = {},  # noqa: B006
        max_tries: Annotated[int, Field(description="draws per operator before the next one", ge=1, le=16)] = 4,
        verify: Annotated[bool, Field(description="draw again when a variant fails the verifier (at most "
                                            f"{MAX_VERIFICATIONS} verifier runs per call; the log says when they "
                                            "ran out)")] = False,
    ) -> programs.Variants:
        """Scene programs of variants of a scene that differ from it only in one factor (nothing is stored)."""
        return programs.vary_scene(spec_of(spec), factor, n, seed, tuple(operators), roles, max_tries, verify,
                                   max_verifications=MAX_VERIFICATIONS)

    @tool(mcp, READ_ONLY)
    def domain_randomize_scene(
        spec: SpecJson,
        ranges: Annotated[programs.DRRanges, Field(
            description="draw ranges (low, high): mass and damping as factors of the category's range and the "
                        "joint's damping, scale as a factor of the instance's, friction absolute")],
        rng_state: Annotated[dict[str, Any], Field(description="numpy PCG64 bit-generator state to draw from "
                                                   "(the previous call's rng_state)")],
    ) -> programs.Randomized:
        """The program of a scene with a redrawn layout and every object's attributes drawn from wide ranges (nothing is stored)."""
        return programs.domain_randomize_scene(spec_of(spec), ranges, rng_state)

    @tool(mcp, READ_ONLY)
    def scene_program(spec: SpecJson) -> programs.SceneProgram:
        """A scene program that rebuilds a scene spec."""
        return programs.program_of(spec_of(spec))

    @tool(mcp, READ_ONLY)
    def proxy_scene(
        spec: SpecJson,
        objects: Annotated[list[ExternalObject], Field(min_length=1, max_length=MAX_OBJECTS, description=(
            "an external episode's objects at reset in this project's frame (the trainer's evaluate_external "
            "with evidence lists them per failure under 'start')"))],
        source: Annotated[str, Field(max_length=128, description="the external task, e.g. robosuite:Lift")] = "",
        seed: Seed = 0,
        start: Annotated[RobotStart | None, Field(description=(
            "where the episode's hand started (the trainer's evaluate_external with evidence gives it per failure "
            "under 'start_robot'); omitted: the scene's own start"))] = None,
        template: Annotated[str, Field(max_length=32, pattern=r"^[a-z0-9_]*$", description=(
            "a task template of the scene's family stating the external task (the trainer's evaluate_external "
            "gives it per task under 'template', e.g. pp_lift for robosuite:Lift); empty: the scene's own task"))] = "",
    ) -> programs.SceneProgram:
        """The program of a scene resembling an external benchmark episode: the seed scene `spec` with its task
        objects moved to where the benchmark's were, the target sized like it, distractors cleared from around
        them, given `start` its hand starting where the episode's did, given `template` its task restated by that
        template (nothing is stored; verify it like any scene)."""
        return programs.program_of(external_proxy(spec_of(spec), objects, source=source, seed=seed, start=start,
                                                  template=template))

    @tool(mcp, READ_ONLY)
    def variation_operators() -> dict[str, list[str]]:
        """The one-factor variation operators by scene factor (for vary_scene)."""
        return programs.variation_operators()

    @tool(mcp, READ_ONLY)
    def scene_objects(spec: SpecJson) -> list[programs.SceneObject]:
        """A scene's objects as role-binding candidates: name, role, category, and the category's tags and kinds."""
        return programs.scene_objects(spec_of(spec))

    @tool(mcp, READ_ONLY)
    def scene_goals(spec: SpecJson) -> list[str]:
        """The goals of a scene's success predicate in execution order (the order the scripted planner reaches them)."""
        return programs.scene_goals(spec_of(spec))

    @tool(mcp, READ_ONLY)
    def program_reference() -> dict[str, str]:
        """Prompt material for writing scene programs: every asset category in one line, and the example programs."""
        return programs.program_reference()

    @tool(mcp, READ_ONLY)
    def potential_reference() -> dict[str, str]:
        """Prompt material for writing Text2potential programs: the helper signatures (helpers) and the learning tools (tools)."""
        return programs.potential_reference()

    @tool(mcp, READ_ONLY)
    def potential_template(
        spec: SpecJson,
        factor: Annotated[Literal["task", "spatial", "attribute", "execution"], Field(description="diagnosed factor δ")],
        phase: Annotated[PhaseName, Field(description="diagnosed phase")],
        cause: Annotated[str, Field(description="the diagnosis' cause sentence (objects it names refine the template)",
                                    max_length=MAX_TEXT_CHARS)],
        learning_tool: Annotated[Literal["bc", "awr_shaped", "reevaluate", "return_to_engine"], Field(
            description="the program's LEARNING_TOOL")] = "awr_shaped",
        level: Annotated[int, Field(description="2: phase refined by the cause; 1: plain phases; 0: one subgoal per goal",
                                    ge=0, le=2)] = 2,
    ) -> str:
        """A Text2potential program for a diagnosis from the phase and cause templates (check it with check_potential)."""
        return programs.potential_template(spec_of(spec), factor, phase, cause, learning_tool, level)

    @tool(mcp, READ_ONLY)
    def plant_failures(
        n: Annotated[int, Field(description="failed rollouts wanted on this page", ge=1, le=50)],
        seed: Annotated[int, Field(description="benchmark seed (scenes and perturbations)", ge=0, le=2**20)] = 0,
        families: Annotated[list[Family], Field(description="task families, kinds in rotation over them",
                                                min_length=1, max_length=4)] = ["pick_place", "stack", "articulated", "prep"],  # noqa: B006 - pydantic copies defaults
        start: Annotated[int, Field(description="try index to start at (the previous page's next_start)", ge=0)] = 0,
        stop: Annotated[int, Field(description="try index to stop before", ge=1, le=100_000)] = 100,
    ) -> planted.PlantedPage:
        """Failed rollouts with planted difficulties of known factor and phase, as critic evidence (a labelled benchmark)."""
        if stop <= start:
            raise ValueError(f"stop ({stop}) must be above start ({start}): the page's tries are start .. stop - 1")
        return planted.planted_page(n, seed, tuple(families), start, stop)

    @resource(mcp, "sim://sdk", name="sdk", description="scene-program SDK reference", mime_type="text/markdown")
    def sdk_resource() -> str:
        return reference.sdk_reference()

    @resource(mcp, "sim://assets", name="assets", description="asset catalogue (all categories)",
                  mime_type="application/json")
    def assets_resource() -> str:
        return to_json(listing.list_assets(limit=10_000))

    @resource(mcp, "sim://scenes/{scene_id}", name="scene", description="a stored scene's spec",
                  mime_type="application/json")
    def scene_resource(scene_id: str) -> str:
        return to_json(store.detail(scene_id).spec)

    load_prompts(mcp, only=("engine",), defaults={"categories": lambda: programs.program_reference()["categories"],
                                                  "examples": lambda: programs.program_reference()["examples"]})
    add_completions(mcp, {"scene_id": store.ids})
    return mcp
