"""The scene store of a run directory: scenes addressed by spec hash — create (sandboxed program), sample,
resample, render, plan — and the traces beside them.

The service the sim server wraps; the verifier, memory and trainer servers read the same run directory through
it. Layout under the run directory:

    scenes/<scene_id>.json      the SceneSpec (scene_id = spec.spec_hash(), 16 hex digits)
    scenes/<scene_id>.py        the program that built it, when it came from a program
    traces/<trace_id>.npz       rollout traces (`sim.trace.Trace.to_bytes`), e.g. planner demonstrations

    store = SceneStore(run_dir)
    info = store.create(source, seed=0)          # raises ValueError with the sandbox's reasons
    store.spec(info.scene_id)                    # SceneSpec
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, Field

from sim.constants import ROBOTS
from sim.fileio import RECORD_ID_PATTERN, SCENE_ID_PATTERN, confine, write_atomic, write_new
from sim.scene import SceneSplit
from sim.spec import SceneSpec

SplitName = Literal["train", "heldout", "instances", "layouts", "tasks", "categories"]
SPLIT_HELP = (
    "train: training side of every factor; instances / layouts / tasks / categories: that factor from the "
    "held-out side (the OOD suites); heldout: every factor held out"
)
RENDER_LOCK = threading.Lock()
"""one offscreen GL context at a time (every server of this process renders under it)"""


def scene_split(name: str) -> SceneSplit:
    from sim.suites import SPLITS

    if name == "train":
        return SceneSplit()
    if name == "heldout":
        return SceneSplit("heldout", "heldout", "heldout", "heldout")
    if name in SPLITS:
        return SPLITS[name]
    raise ValueError(f"unknown split {name!r}; valid: train, heldout, {', '.join(s for s in SPLITS if s != 'in')}")


class ObjectInfo(BaseModel):
    name: str = Field(description="symbol used by predicates and the program")
    category: str
    role: str
    asset: str = Field(description="instance id in the asset pool, e.g. 'mug/007'")


class SceneInfo(BaseModel):
    """A stored scene in brief."""

    scene_id: str = Field(description="spec hash; pass it to the other scene tools")
    family: str
    seed: int
    instruction: str
    template: str
    success: str = Field(description="the success predicate")
    objects: list[ObjectInfo]
    parent: str | None = Field(None, description="scene this one was resampled from")
    varied: str | None = Field(None, description="factor redrawn from the parent")


class SceneDetail(SceneInfo):
    """A stored scene in full: its spec and a program that rebuilds it."""

    spec: dict[str, Any] = Field(description="the SceneSpec as JSON")
    program: str = Field(description="scene program that rebuilds this spec (sim.scene.to_program)")
    source: str | None = Field(None, description="the program that created the scene, when it came from one")


class ScenePage(BaseModel):
    total: int
    offset: int
    scenes: list[SceneInfo]


class DemoSummary(BaseModel):
    """What the scripted planner did on a scene."""

    scene_id: str
    success: bool
    steps: int = Field(description="control steps executed (10 Hz)")
    subgoals: list[str] = Field(description="predicate atoms the plan pursued, in order")
    failure: str | None = Field(None, description="why the plan failed, when it did")
    trace_id: str | None = Field(None, description="saved trace (traces/<trace_id>.npz), when asked for")


def info_of(spec: SceneSpec) -> SceneInfo:
    return SceneInfo(
        scene_id=spec.spec_hash(),
        family=spec.family,
        seed=spec.seed,
        instruction=spec.task.instruction,
        template=spec.task.template,
        success=str(spec.task.success),
        objects=[
            ObjectInfo(name=o.name, category=o.category, role=o.role, asset=spec.attributes.of(o.name).asset)
            for o in spec.task.objects
        ],
        parent=spec.meta.get("parent"),
        varied=spec.meta.get("varied"),
    )


def scene_ids(run_dir: Path) -> list[str]:
    """Ids of the scenes stored in a run directory, sorted; creates nothing (for readers such as completions)."""
    folder = Path(run_dir) / "scenes"
    return sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []


class SceneStore:
    """The scenes and traces of one run directory."""

    def __init__(self, run_dir: Path, robot: str | None = None):
        """`robot`: the run's embodiment; every scene stored (and verified through this store) is made for it.
        None: each scene keeps the robot its program names (default: the floating gripper)."""
        if robot is not None and robot not in ROBOTS:
            raise ValueError(f"unknown robot {robot!r}; valid robots: {', '.join(ROBOTS)}")
        self.robot = robot
        self.run_dir = Path(run_dir).resolve()
        self.scenes_dir = self.run_dir / "scenes"
        self.traces_dir = self.run_dir / "traces"
        self.scenes_dir.mkdir(parents=True, exist_ok=True)
        self.traces_dir.mkdir(parents=True, exist_ok=True)

    # --- storage ------------------------------------------------------------------------------------------

    def _path(self, scene_id: str, suffix: str = ".json") -> Path:
        if not isinstance(scene_id, str) or not re.fullmatch(SCENE_ID_PATTERN, scene_id):
            raise ValueError(f"scene_id must be 16 lowercase hex digits (a spec hash), got {scene_id!r}")
        return self.scenes_dir / f"{scene_id}{suffix}"

    def put(self, spec: SceneSpec, source: str | None = None) -> SceneInfo:
        """Store a spec (and the program that made it) under its hash, for the run's robot. The first store of a hash
        wins: storing it again — even with other metadata or another program text that builds the same scene —
        changes nothing, so no caller can rewrite a scene's lineage or source after the fact."""
        spec = self.for_robot(spec)
        scene_id = spec.spec_hash()
        path = self._path(scene_id)
        if path.is_file():
            return info_of(self.spec(scene_id))
        text = spec.model_dump_json(indent=1)
        info = info_of(SceneSpec.model_validate_json(text))  # what cannot be read back (or listed) is not stored
        if source is not None:  # the program before the spec: a crash between the two leaves a retry to store both
            write_atomic(self._path(scene_id, ".py"), source)
        if not write_new(path, text):  # a concurrent store of the same hash came first
            return info_of(self.spec(scene_id))
        return info

    def for_robot(self, spec: SceneSpec) -> SceneSpec:
        """The scene for the run's robot (unchanged where the store has none)."""
        return spec if self.robot is None else spec.with_robot(self.robot)

    def spec(self, scene_id: str) -> SceneSpec:
        path = self._path(scene_id)
        if not path.is_file():
            raise LookupError(f"unknown scene_id {scene_id!r}; create one with create_scene or sample_scene")
        return SceneSpec.model_validate_json(path.read_text(encoding="utf-8"))

    def distinct_specs(self, scene_ids: list[str], what: str = "scene_ids") -> list[SceneSpec]:
        """The specs of distinct scene ids, in first-seen order; unknown ids are one LookupError naming them."""
        specs, unknown = [], []
        for sid in dict.fromkeys(scene_ids):
            try:
                specs.append(self.spec(sid))
            except LookupError:
                unknown.append(sid)
        if unknown:
            shown = ", ".join(repr(s) for s in unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
            raise LookupError(f"unknown scene id(s) in {what}: {shown}; use scene ids of the sim server's store "
                              "(create_scene or sample_scene)")
        return specs

    def detail(self, scene_id: str) -> SceneDetail:
        from sim.scene import to_program

        spec = self.spec(scene_id)
        src = self._path(scene_id, ".py")
        return SceneDetail(
            **info_of(spec).model_dump(),
            spec=spec.model_dump(mode="json"),
            program=to_program(spec),
            source=src.read_text(encoding="utf-8") if src.is_file() else None,
        )

    def ids(self) -> list[str]:
        """Ids of the stored scenes, sorted (from the file names: nothing is parsed)."""
        return scene_ids(self.run_dir)

    def list(self, offset: int = 0, limit: int = 50) -> ScenePage:
        """Stored scenes, newest first."""
        paths = sorted(self.scenes_dir.glob("*.json"), key=lambda p: (-p.stat().st_mtime, p.name))
        page = [info_of(SceneSpec.model_validate_json(p.read_text(encoding="utf-8"))) for p in
                paths[offset : offset + limit]]
        return ScenePage(total=len(paths), offset=offset, scenes=page)

    # --- making scenes -------------------------------------------------------------------------------------

    def create(self, source: str, seed: int = 0) -> SceneInfo:
        """Run a scene program in the sandbox and store the spec it builds; a failing program raises ValueError."""
        from sim.sandbox import run_untrusted

        result = run_untrusted(source, finalizer="sim.scene:finalize_program", inputs={"globals": {"seed": int(seed)}})
        if not result.ok:
            err = result.error
            where = f" at line {err.lineno}" if err.lineno and not err.message.startswith("line") else ""
            raise ValueError(f"the scene program failed ({err.kind}{where}): {err.message}")
        return self.put(SceneSpec.model_validate(result.value), source)

    def sample(self, family: str, seed: int, split: str = "train") -> SceneInfo:
        """Store the seed scene of a task family."""
        from sim.families import sample_spec

        return self.put(sample_spec(family, seed, scene_split(split)))

    def resample(self, scene_id: str, factor: str, seed: int, split: Literal["train", "heldout"] = "train") -> SceneInfo:
        """Store a copy of a scene with one factor (task, layout or attributes) redrawn."""
        from sim.resample import resample

        new = resample(self.spec(scene_id), factor, np.random.default_rng(seed), split=split)
        return self.put(new)

    # --- using scenes --------------------------------------------------------------------------------------

    def render_png(self, scene_id: str, cameras: list[str], size: int) -> bytes:
        from sim.render import CAMERAS, render_spec_png

        unknown = [c for c in cameras if c not in CAMERAS]
        if unknown or not cameras:
            raise ValueError(f"unknown camera(s) {unknown or cameras}; valid cameras: {', '.join(CAMERAS)}")
        spec = self.spec(scene_id)
        with RENDER_LOCK:
            return render_spec_png(spec, size=size, cameras=tuple(cameras))

    def run_planner(self, scene_id: str, save_trace: bool = False) -> DemoSummary:
        """Run the scripted planner; with save_trace, its trace is saved as traces/planner-<scene_id>.npz."""
        from sim.planner import PlanError
        from sim.verify import verify_spec

        spec = self.spec(scene_id)
        report = verify_spec(spec)
        if not report.passed:  # a planner "success" in a scene that fails verification would mislead
            return DemoSummary(scene_id=scene_id, success=False, steps=0, subgoals=[],
                               failure=f"the scene fails verification, so it is not planned: {report.summary()}")
        try:
            demo, trace = self._plan(spec, record=save_trace)
        except PlanError as exc:
            return DemoSummary(scene_id=scene_id, success=False, steps=0, subgoals=[], failure=str(exc))
        trace_id = None
        if trace is not None:
            trace_id = f"planner-{scene_id}"
            write_atomic(self.traces_dir / f"{trace_id}.npz", trace.to_bytes())
        return DemoSummary(scene_id=scene_id, success=demo.success, steps=demo.steps, subgoals=demo.subgoals,
                           failure=demo.failure, trace_id=trace_id)

    def run_planner_from(self, trace_id: str, step: int, budget: int | None = None) -> DemoSummary:
        """Planner takeover: restore step `step` of a stored trace exactly (`Trace.env_at`) and run the scripted
        planner from there with its own step budget (default: the episode length), skipping subgoals that
        already hold. The summary's steps count from the takeover step; scene_id is the trace's scene."""
        from sim.trace import run_planner_from

        trace = self.trace(trace_id)
        if not 0 <= step <= trace.steps:
            raise ValueError(f"from_step must be within the trace's 0..{trace.steps}, got {step}")
        demo = run_planner_from(trace.env_at(step), budget)
        return DemoSummary(scene_id=trace.spec.spec_hash(), success=demo.success, steps=demo.steps,
                           subgoals=demo.subgoals, failure=demo.failure)

    def planner_trace(self, scene_id: str):
        """The planner's demonstration on a scene as a Trace (not saved)."""
        return self._plan(self.spec(scene_id), record=True)[1]

    @staticmethod
    def _plan(spec: SceneSpec, record: bool):
        """(demo, trace or None): the planner runs closed-loop; its actions are replayed into a recorder."""
        from sim.env import CodaEnv
        from sim.planner import run_planner
        from sim.trace import TraceRecorder

        demo = run_planner(CodaEnv(spec))
        if not record:
            return demo, None
        rec = TraceRecorder(CodaEnv(spec))
        rec.reset()
        for action in demo.actions:
            rec.step(action)
        return demo, rec.trace(source="planner")

    def trace(self, trace_id: str):
        """A stored trace by id: traces/<id>.npz (saved here) or rollouts/<id>.trace (the trainer's rollouts)."""
        from sim.trace import Trace

        if not re.fullmatch(RECORD_ID_PATTERN, trace_id or ""):
            raise ValueError(f"trace_id must be a plain id (letters, digits, _ . : -), got {trace_id!r}")
        for path in (confine(self.run_dir, f"traces/{trace_id}.npz", "trace_id"),
                     confine(self.run_dir, f"rollouts/{trace_id}.trace", "trace_id")):
            if path.is_file():
                return Trace.from_bytes(path.read_bytes())
        known = sorted(p.stem for p in self.traces_dir.glob("*.npz"))[:10]
        raise LookupError(
            f"unknown trace_id {trace_id!r}; saved traces: {', '.join(known) or 'none'} (save one with "
            "run_planner(save_trace=true), or pass a rollout id from the trainer's collect_rollouts)"
        )
