"""MCP server `coda-sim`: assets, the SDK reference, scenes from programs or families, resampling, rendering, the
scripted planner. Typed tool adapters over the run's scene store `sim.scene_store.SceneStore`, the asset listing
`sim.assets.listing` and the SDK reference `sim.reference`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from mcp.server.mcpserver import Context, Image, MCPServer
from pydantic import Field

from servers.common import (
    READ_ONLY,
    WRITES_IDEMPOTENT,
    image_content,
    load_prompts,
    new_server,
    program_caller,
    resource,
    to_json,
    tool,
)
from servers.contract import MAX_IMAGE_PX, MAX_PAGE, MAX_SOURCE_CHARS
from sim import reference
from sim.assets import listing
from sim.assets.listing import AssetPage
from sim.fileio import SCENE_ID_PATTERN
from sim.scene_store import SPLIT_HELP, DemoSummary, SceneDetail, SceneInfo, ScenePage, SceneStore, SplitName

INSTRUCTIONS = """Simulated tabletop scenes for robot learning (MuJoCo). Read `sdk_reference` (or sim://sdk) first.
Make scenes with create_scene (a scene program), sample_scene (a task family's seed scene) or resample_scene (redraw
one factor of a stored scene); each returns a scene_id (the spec hash) used by every other scene tool and by the
verifier, memory and trainer servers sharing this run directory."""

SceneId = Annotated[str, Field(description="scene id (spec hash) from create_scene / sample_scene", pattern=SCENE_ID_PATTERN)]
Seed = Annotated[int, Field(description="random seed (the program's `seed`)", ge=0, le=2**31 - 1)]
Family = Literal["pick_place", "stack", "articulated", "prep"]


def build_server(run_dir: Path) -> MCPServer:
    """The sim server over the scenes of `run_dir`."""
    store = SceneStore(run_dir)
    mcp = new_server("coda-sim", INSTRUCTIONS)

    @tool(mcp, READ_ONLY)
    def list_assets(
        tag: Annotated[str | None, Field(description="only categories with this tag, e.g. 'fruit', 'kitchen'")] = None,
        split: Annotated[Literal["train", "heldout"] | None, Field(description="only this side of the split")] = None,
        kind: Annotated[
            Literal["any", "graspable", "container", "surface", "articulated"], Field(description="only this kind")
        ] = "any",
        offset: Annotated[int, Field(description="first item of the page", ge=0)] = 0,
        limit: Annotated[int, Field(description=f"items per page (≤ {MAX_PAGE})", ge=1, le=MAX_PAGE)] = 50,
    ) -> AssetPage:
        """Asset categories with instance counts, kind, size and split (paged)."""
        return listing.list_assets(tag, split, kind, offset, limit)

    @tool(mcp, READ_ONLY)
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
        limit: Annotated[int, Field(description=f"items per page (≤ {MAX_PAGE})", ge=1, le=MAX_PAGE)] = 50,
    ) -> ScenePage:
        """Stored scenes of this run, newest first (paged)."""
        return store.list(offset, limit)

    @tool(mcp, READ_ONLY)
    def render_scene(
        scene_id: SceneId,
        cameras: Annotated[
            list[Literal["front", "side"]], Field(description="cameras, side by side", min_length=1, max_length=2)
        ] = ["front", "side"],  # noqa: B006 - pydantic copies defaults
        size: Annotated[int, Field(description=f"pixels per camera side (≤ {MAX_IMAGE_PX})", ge=32, le=MAX_IMAGE_PX)
                        ] = 256,
    ) -> Image:
        """Render a scene at rest to an image (PNG, under 1 MB)."""
        return image_content(store.render_png(scene_id, list(cameras), size))

    @tool(mcp, WRITES_IDEMPOTENT)
    def run_planner(
        scene_id: SceneId,
        save_trace: Annotated[bool, Field(description="save the demonstration as traces/planner-<scene_id>.npz")] = False,
    ) -> DemoSummary:
        """Run the scripted planner on a scene: success, steps and subgoals of the demonstration."""
        return store.run_planner(scene_id, save_trace)

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

    load_prompts(mcp)
    return mcp
