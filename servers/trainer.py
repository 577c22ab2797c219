"""MCP server `coda-trainer`: the action-chunk policy of a run — base SFT, rollouts, rollout evidence, critic + AWR
training (optionally shaped by Text2potential programs), evaluation, checkpoints. Thin adapter over
`policy.service.TrainerService`; long work runs as jobs (start → wait_job / get_job / cancel_job)."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from policy.config import (
    CRITIC_UPDATES,
    DEMOS_PER_FAMILY,
    EVAL_PER_SUITE,
    POLICY_UPDATES,
    ROLLOUTS_PER_SCENE,
    SFT_UPDATES,
    BackboneName,
)
from policy.service import TrainerService
from servers.common import (
    READ_ONLY,
    WRITES,
    WRITES_IDEMPOTENT,
    add_completions,
    image_content,
    load_prompts,
    new_server,
    tool,
)
from servers.contract import MAX_BATCH, MAX_IMAGE_PX, MAX_POTENTIALS_CHARS, MAX_SOURCE_CHARS
from servers.jobs import JobHandle, JobManager, register_job_tools
from sim.constants import Distribution, Robot
from sim.constants import EvalSuiteName as Suite
from sim.constants import FamilyName as Family
from sim.fileio import RECORD_ID_PATTERN, SCENE_ID_PATTERN
from sim.scene_store import RENDER_LOCK, SceneStore
from sim.workers import make_executor

INSTRUCTIONS = """The run's action-chunk policy. Start with train_sft (base policy from planner demonstrations),
then per round: collect_rollouts on scene_ids from the sim server, get_rollout_evidence for failed rollouts,
start_training on rollout ids (optionally with Text2potential programs per scene), evaluate on suites. Long calls
return a job_id: follow it with wait_job."""

SceneId = Annotated[str, Field(pattern=SCENE_ID_PATTERN)]
RolloutId = Annotated[str, Field(pattern=RECORD_ID_PATTERN, description="rollout id from collect_rollouts")]
ExternalTask = Annotated[str, Field(pattern=r"^(robosuite|metaworld):[A-Za-z0-9_\-]{1,64}$",
                                   description="BENCHMARK:TASK, e.g. robosuite:Lift")]
CHECKPOINT_NAME = r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,63}$"
REPLACES = ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=False, openWorldHint=False)
"""replaces the current policy and the `base` checkpoint"""


_COUNTING = threading.local()


@contextmanager
def counting_episodes(job: JobHandle):
    """Inside: every episode that ends in a batched rollout of this thread adds one unit to `job`'s progress, and
    a cancelled `job` stops after the chunk being stepped (see `CountingExecutor`)."""
    _COUNTING.job = job
    try:
        yield
    finally:
        _COUNTING.job = None


class CountingExecutor:
    """The trainer's executor (`sim.workers`) with its env pools reporting to the job of `counting_episodes`:
    after every chunk of a batched rollout, that job counts the episodes that ended and stops if cancelled.
    Everything else, and the episodes themselves, are the wrapped executor's."""

    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    @contextmanager
    def env_pool(self):
        with self.inner.env_pool() as pool:
            yield _CountingPool(pool)


class _CountingPool:
    def __init__(self, pool):
        self.pool = pool

    def __getattr__(self, name: str):
        return getattr(self.pool, name)

    def step(self, chunks):
        out = self.pool.step(chunks)
        job = getattr(_COUNTING, "job", None)
        if job is not None:
            job.advance(sum(r.done for r in out.values()))
        return out


class JobStarted(BaseModel):
    job_id: str
    kind: str


class RolloutEvidence(BaseModel):
    rollout_id: str
    scene_id: str
    success: bool
    steps: int
    summary: str = Field(description="the evidence as text (what the failure critic reads)")
    evidence: dict[str, Any] = Field(description="sim.evidence.Evidence as JSON; keyframe images follow as image "
                                                 "content when asked for")


class CheckpointList(BaseModel):
    checkpoints: list[str]
    current_step: int | None
    has_critic: bool


class CheckpointInstalled(BaseModel):
    tag: str
    installed: bool = Field(description="copied now (false: the run already had a checkpoint of that name)")
    checkpoints: list[str]


def build_server(run_dir: Path, device: str | None = None, workers: int = 1, executor: str = "local",
                 ray_address: str | None = None, import_dir: Path | None = None,
                 train_threads: int | None = None) -> MCPServer:
    """The trainer server of `run_dir` (scenes are read from the sim server's store in the same run dir).
    Demos, rollouts and evaluations simulate on `workers` local processes or Ray actors (`executor`);
    `install_checkpoint` copies checkpoints from `import_dir` (none: the tool refuses); the SFT and a round's
    updates run on `train_threads` torch threads (None: the process's count)."""
    service = TrainerService(run_dir, device=device, import_dir=import_dir, train_threads=train_threads,
                             executor=CountingExecutor(make_executor(executor, workers, address=ray_address)))
    scenes = SceneStore(run_dir)
    jobs = JobManager(run_dir / "jobs" / "trainer")
    mcp = new_server("coda-trainer", INSTRUCTIONS)
    register_job_tools(mcp, jobs)

    def reporter(job: JobHandle):
        return lambda done, total, metrics: job.progress(done, total, ", ".join(f"{k}={v:.4g}" for k, v in metrics.items()))

    @tool(mcp, REPLACES, title="Train base policy (SFT)")
    def train_sft(
        families: Annotated[list[Family], Field(description="task families whose demos train the base policy",
                                                min_length=1, max_length=4)],
        demos_per_family: Annotated[int, Field(description="planner demonstrations per family", ge=1, le=2000)
                                    ] = DEMOS_PER_FAMILY,
        updates: Annotated[int, Field(description="behaviour-cloning updates", ge=1, le=100_000)] = SFT_UPDATES,
        backbone: Annotated[BackboneName | None, Field(
            description="token encoder of the new policy (default: the server's, transformer unless configured)")
                            ] = None,
        seed: Annotated[int | None, Field(ge=0, le=2**31 - 1, description="training seed of the new policy "
                                          "(default: the server's, 0 unless configured)")] = None,
        distribution: Annotated[Distribution, Field(
            description="scenes of the demos: 'train' (the whole train side) or 'seed' (its narrow seed "
                        "distribution: few instances, categories and layouts, like the paper's seed scenes)")
                                ] = "train",
        robot: Annotated[Robot, Field(
            description="embodiment of the demos and of the policy: 'gripper' (the floating parallel-jaw gripper) or "
                        "'panda' (the Franka Panda; needs robosuite's model, scripts/setup --external)")] = "gripper",
    ) -> JobStarted:
        """Start a job: base policy by behaviour cloning on planner demonstrations (replaces the current policy;
        saved as checkpoint `base`)."""
        from sim.compile import require_robot

        require_robot(robot)  # refused at once (a clear error) where the Panda model is not installed

        def run(job: JobHandle):
            return service.sft(families, demos_per_family, updates, progress=reporter(job), backbone=backbone,
                               seed=seed, distribution=distribution, robot=robot)

        return JobStarted(job_id=jobs.start(run, kind="train_sft"), kind="train_sft")

    def policy_required() -> None:
        """Jobs that need the current policy are refused at once without one (not a job that fails later)."""
        if service.state is None:
            raise ValueError("no policy yet: train the base policy first (train_sft) or load a checkpoint "
                             "(load_checkpoint; list_checkpoints shows them)")

    @tool(mcp, WRITES)
    def collect_rollouts(
        scene_ids: Annotated[list[SceneId], Field(description="scenes to roll out in", min_length=1, max_length=MAX_BATCH)],
        per_scene: Annotated[int, Field(description="rollouts per scene", ge=1, le=16)] = ROLLOUTS_PER_SCENE,
        mode: Annotated[Literal["sample", "mean", "critic"], Field(description="action selection")] = "sample",
        seed: Annotated[int, Field(ge=0, le=2**31 - 1, description="exploration seed")] = 0,
        tag: Annotated[str, Field(pattern=r"^[a-z0-9]{1,16}$", description="prefix of the rollout ids")] = "r",
    ) -> JobStarted:
        """Start a job: roll the current policy out (batched; progress counts finished episodes); the result lists
        rollout ids with success."""
        policy_required()
        specs = [scenes.spec(s) for s in scene_ids]

        def run(job: JobHandle):
            job.progress(0, len(specs) * per_scene, "rolling out")
            with counting_episodes(job):
                out = service.rollouts(specs, per_scene, mode=mode, seed=seed, tag=tag)
            job.progress(len(out), len(out), "done")
            return out

        return JobStarted(job_id=jobs.start(run, kind="rollouts"), kind="rollouts")

    @tool(mcp, READ_ONLY)
    def get_rollout_evidence(
        rollout_id: RolloutId,
        keyframes: Annotated[bool, Field(description="also render 2-4 keyframes, returned as images (slower)")
                             ] = False,
    ) -> Annotated[CallToolResult, RolloutEvidence]:
        """Evidence of one rollout: phase timeline, contacts and grasps, goal distances, predicate terms over time."""
        from sim.evidence import extract_evidence

        trace = service.trace(rollout_id)
        if keyframes:
            with RENDER_LOCK:
                ev = extract_evidence(trace, keyframes=True, rollout_id=rollout_id)
        else:
            ev = extract_evidence(trace, rollout_id=rollout_id)
        out = RolloutEvidence(rollout_id=rollout_id, scene_id=trace.spec.spec_hash(), success=trace.success,
                              steps=trace.steps, summary=ev.to_prompt_text(), evidence=ev.model_dump(mode="json"))
        content: list = [TextContent(type="text", text=out.model_dump_json())]
        for k in ev.keyframes:
            if k.png:
                content.append(TextContent(type="text", text=f"keyframe at step {k.step}: {k.label}"))
                content.append(image_content(k.png).to_image_content())
        return CallToolResult(content=content, structured_content=out.model_dump(mode="json"))

    @tool(mcp, READ_ONLY)
    def rollout_keyframe(
        rollout_id: RolloutId,
        step: Annotated[int, Field(description="control step (0 = start)", ge=0, le=10_000)],
        size: Annotated[int, Field(ge=32, le=MAX_IMAGE_PX, description="pixels per camera")] = 224,
    ):
        """Render one step of a rollout (front and side cameras) as a PNG image."""
        from sim.render import Cameras, side_by_side, to_png

        trace = service.trace(rollout_id)
        if step > trace.steps:
            raise ValueError(f"step {step} is past the end of rollout {rollout_id} (steps 0..{trace.steps})")
        env = trace.replay_env()
        trace.state_at(step, env)
        with RENDER_LOCK, Cameras(env.model, size) as cams:
            return image_content(to_png(side_by_side([cams.frame(env.data, c) for c in ("front", "side")])))

    @tool(mcp, WRITES)
    def start_training(
        rollout_ids: Annotated[list[RolloutId], Field(description="rollouts to learn from", min_length=1, max_length=4096)],
        potential_programs: Annotated[
            dict[SceneId, Annotated[str, Field(min_length=1, max_length=MAX_SOURCE_CHARS)]],
            Field(description="Text2potential program source per scene_id (rollouts in other scenes stay sparse; a "
                              "program that fails on its scene is reported in potential_failures and its rollouts "
                              "train unshaped)",
                  max_length=MAX_BATCH),
        ] = {},  # noqa: B006 - pydantic copies defaults
        demo_families: Annotated[list[Family], Field(description="families whose planner demos are mixed in as BC")] = [],  # noqa: B006
        demos_per_family: Annotated[int, Field(ge=0, le=2000, description="planner demos per demo family (0: none)")
                                    ] = 0,
        demo_scene_ids: Annotated[
            list[SceneId],
            Field(description="scenes whose planner demos are mixed in as BC (the round's D_t: every accepted scene of "
                              "the round, or the targeted scenes of modes routed to BC; scenes the planner fails in "
                              "add none)", max_length=4 * MAX_BATCH),
        ] = [],  # noqa: B006
        bc_successes: Annotated[bool, Field(
            description="also clone the successful ones of rollout_ids (the policy's own successes)")] = False,
        balance_families: Annotated[bool, Field(
            description="balance the BC data by family: each family's episodes repeated until it has as many "
                        "transitions as the largest (a round's demos follow its failures and long-horizon "
                        "families have longer episodes)")] = False,
        critic_updates: Annotated[int, Field(ge=0, le=100_000, description="K_Q critic updates")] = CRITIC_UPDATES,
        policy_updates: Annotated[int, Field(ge=0, le=100_000, description="K_pi policy updates")] = POLICY_UPDATES,
        lora: Annotated[bool, Field(description="fine-tune LoRA adapters on the base policy")] = False,
        collect: Annotated[Literal["branch", "rollouts", "critic", "bc"], Field(
            description="data of the AWR policy updates: branch = sampled chunks tried against the policy's mean "
                        "chunk from the same states in the rollouts' scenes (Monte-Carlo advantages; in scenes with a "
                        "potential program the branches are cut after a few chunks and valued by Φ); rollouts = "
                        "the given rollouts with the configured advantages; critic = the given rollouts with the "
                        "critic's own advantages (Q - mean Q; with potentials, potential-based shaping); bc = "
                        "behaviour cloning on the demos only")
                            ] = "branch",
        replicate: Annotated[int, Field(ge=0, le=1000, description=(
            "training replicate: > 0 reseeds the update's sampling from (replicate, step), so the same data gives "
            "another run of the update; 0 keeps the policy's own random streams"))] = 0,
        takeover_scene_ids: Annotated[
            list[SceneId],
            Field(description="scenes where the policy is rolled out once (mean actions) and, where it fails, the "
                              "planner takes over at the failure's diagnosed step; the certified corrective windows "
                              "(a regrasp after a missed grasp, ...) are mixed in as BC", max_length=MAX_BATCH),
        ] = [],  # noqa: B006
        takeover_failed: Annotated[bool, Field(
            description="also the corrective windows from the failed ones of rollout_ids themselves: the planner takes "
                        "over at each failure's diagnosed step of its saved trace (one per scene), mixed in as BC")
                                   ] = False,
    ) -> JobStarted:
        """Start a job: chunk-critic TD updates (shaped by the potentials) then AWR policy updates, with BC on
        planner demos of demo_families and demo_scene_ids (and, with bc_successes, the rollouts' successes)."""
        from sim.potential import static_problems

        service.check_rollouts(rollout_ids)
        demo_specs = scenes.distinct_specs(demo_scene_ids, "demo_scene_ids")
        takeover_specs = scenes.distinct_specs(takeover_scene_ids, "takeover_scene_ids")
        total = sum(map(len, potential_programs.values()))
        if total > MAX_POTENTIALS_CHARS:
            raise ValueError(f"potential_programs: {total:,} characters in all, at most {MAX_POTENTIALS_CHARS:,} per "
                             "call (one program per scene of the rollouts; scenes of one mode can share a source)")
        checked: dict[str, list[str]] = {}  # scenes of one mode often share a source: checked once
        for sid, source in potential_programs.items():
            problems = checked[source] if source in checked else checked.setdefault(source, static_problems(source))
            if problems:
                raise ValueError(f"potential_programs[{sid!r}] does not pass the static checks: {'; '.join(problems)}"
                                 " (check it with the verifier's check_potential)")

        def run(job: JobHandle):
            potentials, unused, failed = None, [], {}
            if potential_programs:
                potentials, unused, failed = service.potentials(
                    potential_programs, rollout_ids, lambda n, total: job.progress(n, total, "potentials"))
            info = service.train(rollout_ids, potentials=potentials, demo_families=demo_families,
                                 demos_per_family=demos_per_family, scene_demos=demo_specs,
                                 critic_updates=critic_updates,
                                 policy_updates=policy_updates, lora=lora, progress=reporter(job),
                                 collect=collect, bc_successes=bc_successes,
                                 programs={sid: src for sid, src in potential_programs.items() if sid not in failed},
                                 balance=balance_families, replicate=replicate, takeover_scenes=takeover_specs,
                                 takeover_failed=takeover_failed)
            failed.update((info.get("branch") or {}).pop("potential_failures", {}))  # failed on a branch's states
            return {**info, "potential_scenes_without_rollouts": unused, "potential_failures": failed}

        return JobStarted(job_id=jobs.start(run, kind="train"), kind="train")

    @tool(mcp, WRITES)  # starts a job: a retry would start a second one
    def evaluate(
        families: Annotated[list[Family], Field(min_length=1, max_length=4, description="families to evaluate")],
        suites: Annotated[list[Suite], Field(min_length=1, max_length=6, description="evaluation suites ('seed': "
                                             "unseen scenes of the base's seed distribution)")] = ["in"],  # noqa: B006
        n: Annotated[int, Field(ge=1, le=200, description="scenes per (family, suite)")] = EVAL_PER_SUITE,
        mode: Annotated[Literal["mean", "critic"], Field(description="action selection")] = "mean",
    ) -> JobStarted:
        """Start a job: success rate ± standard error per (family, suite) on fixed evaluation scenes (progress
        counts finished episodes)."""
        policy_required()
        pairs = [(f, s) for f in dict.fromkeys(families) for s in dict.fromkeys(suites)]  # repeats once

        def run(job: JobHandle):
            rows = []
            for family, suite in pairs:
                job.progress(len(rows) * n, len(pairs) * n, f"{family} {suite}")
                with counting_episodes(job):
                    rows += service.evaluate([family], [suite], n, mode=mode)
            job.progress(len(rows) * n, len(pairs) * n, "done")
            return rows

        return JobStarted(job_id=jobs.start(run, kind="evaluate"), kind="evaluate")

    @tool(mcp, WRITES)  # starts a job: a retry would start a second one
    def evaluate_external(
        tasks: Annotated[list[ExternalTask], Field(min_length=1, max_length=16, description="external benchmark "
                                                   "tasks as BENCHMARK:TASK, e.g. robosuite:Lift, metaworld:push-v3")],
        n: Annotated[int, Field(ge=1, le=200, description="episodes per task and seed group")] = 10,
        seeds: Annotated[int, Field(ge=1, le=10, description="seed groups (episode e of group k resets the "
                                    "benchmark with seed k * 100000 + e)")] = 1,
        first_group: Annotated[int, Field(ge=0, le=1000, description="the first seed group (probes of a loop use "
                                          "groups apart from its final evaluation's)")] = 0,
        mode: Annotated[Literal["mean", "critic"], Field(description="action selection")] = "mean",
        evidence: Annotated[bool, Field(description="keep each failed episode's rollout evidence and objects at "
                                        "reset in its row's `failures`")] = False,
    ) -> JobStarted:
        """Start a job: success rate per external benchmark task (the benchmark's own simulator and success, in
        its own virtualenv from `scripts/setup --external`), with the phase analysis of its episodes."""
        from policy.external import parse_external
        from policy.external.base import ExternalUnavailable, external_python

        try:
            targets = parse_external(" ".join(tasks))
        except ValueError as exc:
            raise ValueError(f"tasks: {exc}") from None
        policy_required()
        for benchmark in dict.fromkeys(b for b, _ in targets):
            try:
                external_python(benchmark)
            except ExternalUnavailable as exc:
                raise ValueError(str(exc)) from None

        def run(job: JobHandle):
            rows = []
            for k, task in enumerate(tasks):
                job.progress(k * n * seeds, len(tasks) * n * seeds, task)
                rows += service.evaluate_external([task], n, seeds, first_group=first_group, mode=mode,
                                                  workers=workers, evidence=evidence)
            job.progress(len(tasks) * n * seeds, len(tasks) * n * seeds, "done")
            return rows

        return JobStarted(job_id=jobs.start(run, kind="evaluate"), kind="evaluate")

    @tool(mcp, READ_ONLY)
    def list_checkpoints() -> CheckpointList:
        """Saved checkpoints of this run and the current policy's update count."""
        st = service.state
        return CheckpointList(checkpoints=service.checkpoints(), current_step=None if st is None else st.step,
                              has_critic=bool(st is not None and st.critic is not None))

    @tool(mcp, WRITES_IDEMPOTENT)
    def load_checkpoint(tag: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.\-]{1,64}$", description="checkpoint name")]
                        ) -> CheckpointList:
        """Make a saved checkpoint the current policy."""
        service.load(tag)
        return list_checkpoints()

    @tool(mcp, WRITES_IDEMPOTENT)
    def install_checkpoint(
        name: Annotated[str, Field(pattern=CHECKPOINT_NAME, description="checkpoint in the import directory the "
                                   "server was started with (--import-checkpoints), e.g. a shared base policy")],
        tag: Annotated[str | None, Field(pattern=CHECKPOINT_NAME, description="name in this run (default: name)")
                       ] = None,
    ) -> CheckpointInstalled:
        """Copy a checkpoint into this run, unless the run already has one of that name (it keeps its own). The
        current policy does not change: load_checkpoint makes it current."""
        installed = service.install(name, tag)
        return CheckpointInstalled(tag=tag or name.removesuffix(".pt"), installed=installed,
                                   checkpoints=service.checkpoints())

    load_prompts(mcp, only=("round",), defaults={"external": str})
    add_completions(mcp, {"scene_id": scenes.ids})
    return mcp
