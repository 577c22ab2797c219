"""The trainer as a long-lived service (what the trainer MCP server wraps): one policy per run directory.

It keeps the current TrainState, planner demonstrations and own rollouts (with replayable traces on disk), and
offers the operations of a round: base SFT, rollouts, critic + AWR training with optional potentials, evaluation,
and checkpoints. Everything is keyed by ids so a client can refer to rollouts across calls.

`checkpoints/latest.pt` is always the current policy (it is what a restarted service resumes from): SFT, training
and `load` write it; a training that fails or is cancelled puts the current policy back from it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from policy.checkpoint import TrainState, fresh, load_checkpoint, own_file, read_payload, save_checkpoint
from policy.config import CRITIC_UPDATES, POLICY_UPDATES, ROLLOUTS_PER_SCENE, PolicyConfig, TrainConfig
from policy.data import stack_obs
from policy.evaluate import chunk_fn, evaluate, policy_robot, train_specs
from policy.improve import awr_round, branch_round, collect
from policy.rollout import Episode, planner_demos, rollout
from policy.takeover import takeover_demos
from policy.train import Progress, balance_families, bc_finetune, demo_buffer, torch_threads, train_sft
from sim.constants import DEFAULT_ROBOT, OBS_INSTRUCTION
from sim.spec import SceneSpec
from sim.trace import Trace
from sim.workers import SERIAL, Executor

log = logging.getLogger(__name__)

LATEST = "latest.pt"
COLLECT = ("branch", "rollouts", "critic", "bc")
"""data and advantages of a training job's policy updates (`PolicyService.train`)"""


class TrainerService:
    def __init__(self, run_dir: Path | str, policy_config: PolicyConfig | None = None,
                 train_config: TrainConfig | None = None, device=None, executor: Executor | None = None,
                 import_dir: Path | str | None = None, train_threads: int | None = None):
        self.run_dir = Path(run_dir)
        self.ckpt_dir = self.run_dir / "checkpoints"
        self.rollout_dir = self.run_dir / "rollouts"
        self.ckpt_dir.mkdir(parents=True, exist_ok=True)
        self.rollout_dir.mkdir(parents=True, exist_ok=True)
        self.pcfg = policy_config or PolicyConfig()
        self.tcfg = train_config or TrainConfig()
        self.device = device
        self.executor = executor or SERIAL
        """where planner demos, rollouts and evaluations simulate (in process by default)"""
        self.train_threads = train_threads
        """torch threads of the SFT and of a round's critic and policy updates (None: the process's count); the
        simulation around them (demos, rollouts, branches, evaluations) keeps the process's count"""
        self.import_dir = None if import_dir is None else Path(import_dir).resolve()
        """checkpoints `install` may copy into this run (e.g. a base policy shared by several runs)"""
        self.lock = threading.RLock()
        self.state: TrainState | None = None
        self.demos: dict[str, list[Episode]] = {}
        self.scene_demos: dict[str, Episode | None] = {}
        """planner demo per scene spec hash (None: the planner failed there), so a retried job does not re-plan"""
        self.episodes: dict[str, Episode] = {}
        if (self.ckpt_dir / LATEST).exists():
            self.state = load_checkpoint(own_file(self.ckpt_dir / LATEST), device=device)

    # --- policy lifecycle -------------------------------------------------------------------
    def require_state(self) -> TrainState:
        if self.state is None:
            raise RuntimeError("no policy yet: run the base SFT first (train_sft) or load a checkpoint")
        return self.state

    def demos_for(self, family: str, n: int, distribution: str = "train", robot: str = DEFAULT_ROBOT
                  ) -> list[Episode]:
        key = (f"{family}:{n}" + ("" if distribution == "train" else f":{distribution}")
               + ("" if robot == DEFAULT_ROBOT else f":{robot}"))
        if key not in self.demos:
            self.demos[key] = planner_demos(train_specs(family, n, start=300_000, distribution=distribution,
                                                        robot=robot), executor=self.executor)
        return self.demos[key]

    def demos_for_scenes(self, specs: Sequence[SceneSpec]) -> list[Episode]:
        """Successful planner demonstrations of the given scenes (one per distinct scene, in order); the planner
        runs once per spec hash for the life of the service."""
        unique = list({s.spec_hash(): s for s in specs}.items())
        todo = [spec for h, spec in unique if h not in self.scene_demos]
        if todo:
            got = {ep.spec_hash: ep for ep in planner_demos(todo, executor=self.executor)}
            for spec in todo:
                h = spec.spec_hash()
                self.scene_demos[h] = got.get(h)
        return [ep for h, _ in unique if (ep := self.scene_demos[h]) is not None]

    def sft(self, families: Sequence[str], demos_per_family: int, updates: int,
            progress: Progress | None = None, *, backbone: str | None = None, seed: int | None = None,
            distribution: str = "train", robot: str = DEFAULT_ROBOT) -> dict:
        """Base policy: behaviour cloning on planner demonstrations of the given families (saved as `base`), on
        scenes of the whole train side or (`distribution="seed"`) of its narrow seed distribution, with the
        embodiment `robot` (the policy's; its evaluations use it). `backbone` and `seed` replace those of the
        service's configurations for this policy."""
        pcfg = self.pcfg if backbone is None else dataclasses.replace(self.pcfg, backbone=backbone)
        tcfg = self.tcfg if seed is None else dataclasses.replace(self.tcfg, seed=seed)
        with self.lock:
            demos = [d for f in families for d in self.demos_for(f, demos_per_family, distribution, robot)]
            with torch_threads(self.train_threads):
                state, tlog = train_sft(demos, pcfg, tcfg, updates, progress=progress, device=self.device)
            state.extra.update({"kind": "sft", "families": list(families), "demos": len(demos),
                                "distribution": distribution, "robot": robot})
            self.state = state
            self.save("base")
            return {"demos": len(demos), **tlog.summary()}

    def save(self, tag: str) -> str:
        state = self.require_state()
        path = save_checkpoint(self.ckpt_dir / f"{tag}.pt", state)
        save_checkpoint(self.ckpt_dir / LATEST, state)
        return str(path)

    def load(self, tag: str) -> None:
        """Make a saved checkpoint the current policy (refused while a job uses the policy)."""
        path = self.ckpt_dir / (tag if tag.endswith(".pt") else f"{tag}.pt")
        if not path.exists():
            raise FileNotFoundError(f"no checkpoint {path.name}; available: {self.checkpoints()}")
        own_file(path)  # before the lock: a FIFO would block while holding it
        if not self.lock.acquire(blocking=False):
            raise BlockingIOError("the policy is in use by a running job; wait for it (or cancel it), then load")
        try:
            self.state = load_checkpoint(path, device=self.device)
            if path.name != LATEST:
                tmp = fresh(self.ckpt_dir / f"{LATEST}.tmp")
                shutil.copyfile(path, tmp)
                tmp.replace(self.ckpt_dir / LATEST)
        finally:
            self.lock.release()

    def install(self, name: str, tag: str | None = None) -> bool:
        """Copy checkpoint `name` of the import directory into this run as `tag` (default: the same name), unless
        the run already has a checkpoint `tag` (a resumed run keeps its own). The current policy is unchanged
        (`load` makes it current). Returns whether it copied."""
        if self.import_dir is None:
            raise PermissionError("this trainer has no directory to install checkpoints from (start the server with "
                                  "--import-checkpoints DIR)")
        src = self.import_dir / (name if name.endswith(".pt") else f"{name}.pt")
        if src.resolve().parent != self.import_dir or not src.is_file():
            available = sorted(p.stem for p in self.import_dir.glob("*.pt"))
            raise FileNotFoundError(f"no checkpoint {src.name} to install; available: {available}")
        tag = tag or src.stem
        dst = self.ckpt_dir / (tag if tag.endswith(".pt") else f"{tag}.pt")
        if dst.exists():
            return False
        read_payload(src)  # a checkpoint of this code's format and a plausible size, or a clear error
        tmp = fresh(self.ckpt_dir / f".{dst.name}.tmp")
        shutil.copyfile(src, tmp)
        tmp.replace(dst)
        return True

    def _restore(self) -> None:
        """Put the current policy back from latest.pt (after a failed or cancelled update)."""
        latest = self.ckpt_dir / LATEST
        self.state = load_checkpoint(own_file(latest), device=self.device) if latest.exists() else None

    def checkpoints(self) -> list[str]:
        return sorted(p.stem for p in self.ckpt_dir.glob("*.pt"))

    # --- rollouts ---------------------------------------------------------------------------
    def rollouts(self, specs: Sequence[SceneSpec], per_scene: int = ROLLOUTS_PER_SCENE, mode: str = "sample",
                 seed: int = 0, tag: str = "r") -> list[dict]:
        """Roll the current policy out; each episode is kept (and its trace saved) under a rollout id."""
        with self.lock:
            state = self.require_state()
            episodes = collect(state, specs, per_scene, mode=mode, seed=seed, record=True, executor=self.executor)
            out = []
            for i, ep in enumerate(episodes):
                # the policy's update count keeps ids of later policies apart (same tag and seed next round)
                rid = f"{tag}-{state.step}-{seed}-{i:04d}-{ep.spec_hash[:8]}"
                self.episodes[rid] = ep
                self._save_episode(rid, ep)
                out.append({"rollout_id": rid, "scene_id": ep.spec_hash, "success": ep.success, "steps": ep.steps})
            return out

    def _save_episode(self, rid: str, ep: Episode) -> None:
        arrays = stack_obs(ep.observations)
        arrays = {k: v for k, v in arrays.items() if k != OBS_INSTRUCTION}
        np.savez_compressed(fresh(self.rollout_dir / f"{rid}.npz"), actions=ep.actions, **arrays)
        if ep.trace is not None:
            fresh(self.rollout_dir / f"{rid}.trace").write_bytes(ep.trace.to_bytes())
        meta = {"spec_hash": ep.spec_hash, "family": ep.family, "success": ep.success, "steps": ep.steps,
                "instruction": ep.observations[0][OBS_INSTRUCTION]}
        fresh(self.rollout_dir / f"{rid}.json").write_text(json.dumps(meta))

    def has_rollout(self, rid: str) -> bool:
        return rid in self.episodes or (self.rollout_dir / f"{rid}.json").is_file()

    def check_rollouts(self, rollout_ids: Sequence[str]) -> None:
        """Raise KeyError naming the rollout ids this service does not have."""
        unknown = [r for r in dict.fromkeys(rollout_ids) if not self.has_rollout(r)]
        if unknown:
            shown = ", ".join(repr(r) for r in unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
            raise KeyError(f"unknown rollout id(s) {shown}; use ids returned by collect_rollouts")

    def potentials(self, programs: Mapping[str, str], rollout_ids: Sequence[str],
                   progress: Callable[[int, int], None] | None = None) -> tuple[dict[str, list[float]], list[str]]:
        """Φ at every state of each rollout whose scene has a program in `programs` (scene id -> source), run in
        the sandbox once per scene. Returns (potentials by rollout id, scene ids of `programs` no rollout is in,
        {scene id: why} for programs that failed on their scene — e.g. a mode's potential naming an object that one
        of the mode's scenes lacks: those rollouts train unshaped, the rest of the job goes on)."""
        from sim.potential import PotentialError, episode, phi_values

        by_scene: dict[str, list[tuple[str, Trace]]] = {}
        for rid in dict.fromkeys(rollout_ids):
            trace = self.trace(rid)
            sid = trace.spec.spec_hash()
            if sid in programs:
                by_scene.setdefault(sid, []).append((rid, trace))
        out: dict[str, list[float]] = {}
        failed: dict[str, str] = {}
        for n, (sid, items) in enumerate(by_scene.items(), start=1):
            try:
                values = phi_values(programs[sid], items[0][1].spec, [episode(t) for _, t in items])
            except PotentialError as exc:
                failed[sid] = str(exc)
                continue
            out.update({rid: v for (rid, _), v in zip(items, values, strict=True)})
            if progress is not None:
                progress(n, len(by_scene))
        return out, [sid for sid in programs if sid not in by_scene], failed

    def trace(self, rid: str) -> Trace:
        ep = self.episodes.get(rid)
        if ep is not None and ep.trace is not None:
            return ep.trace
        path = self.rollout_dir / f"{rid}.trace"
        if not path.exists():
            raise KeyError(f"unknown rollout id {rid!r}; use ids returned by collect_rollouts")
        return Trace.from_bytes(own_file(path).read_bytes())

    def episode(self, rid: str) -> Episode:
        if rid in self.episodes:
            return self.episodes[rid]
        meta_path = self.rollout_dir / f"{rid}.json"
        if not meta_path.exists():
            raise KeyError(f"unknown rollout id {rid!r}; use ids returned by collect_rollouts")
        try:
            meta = json.loads(own_file(meta_path).read_text())
            z = np.load(own_file(self.rollout_dir / f"{rid}.npz"))
        except (OSError, ValueError) as exc:
            raise ValueError(f"rollout {rid!r} is damaged or incomplete in {self.rollout_dir}: {exc}") from None
        keys = [k for k in z.files if k != "actions"]
        obs = [{**{k: z[k][t] for k in keys}, OBS_INSTRUCTION: meta["instruction"]} for t in range(len(z["actions"]) + 1)]
        ep = Episode(meta["spec_hash"], meta["family"], obs, z["actions"], meta["success"], meta["steps"])
        self.episodes[rid] = ep
        return ep

    # --- training ---------------------------------------------------------------------------
    def train(self, rollout_ids: Sequence[str], *, potentials: dict[str, list[float]] | None = None,
              demo_families: Sequence[str] = (), demos_per_family: int = 0,
              scene_demos: Sequence[SceneSpec] = (), critic_updates: int = CRITIC_UPDATES,
              policy_updates: int = POLICY_UPDATES, lora: bool = False, progress: Progress | None = None,
              collect: str = "branch", programs: Mapping[str, str] | None = None,
              bc_successes: bool = False, balance: bool = False, replicate: int = 0,
              takeover_scenes: Sequence[SceneSpec] = (), takeover_failed: bool = False) -> dict:
        """Critic updates on the given rollouts (shaped by per-rollout potentials when given), then AWR policy
        updates, with BC on planner demos of `demo_families` (`demos_per_family` each) and of the scenes
        `scene_demos` (the round's D_t: every accepted environment of the round, or the targeted scenes of modes
        routed to BC; scenes the planner fails in add nothing) and, with `bc_successes`, on the successful ones of
        the given rollouts (the policy's own successes). With `balance`, the BC data is balanced by family
        (`policy.train.balance_families`: each family's episodes repeated to the transitions of the largest).

        collect="branch" (default): the policy updates use branch rollouts in the scenes of the given rollouts
        (`policy.branch`: Monte-Carlo advantages of sampled chunks over the mean chunk from the same states;
        in scenes with a potential program in `programs` (scene id -> source) the branches are cut and valued by
        the potential, run in the sandbox);
        "rollouts": AWR on the given rollouts with the configured advantages (`TrainConfig.advantage`; measured to
        pull a weak policy down, see docs/BENCHMARKS.md); "critic": the same with the critic's own advantages
        (A = Q_Φ(s, a) − mean_j Q_Φ(s, a_j), advantage "q": with potentials, potential-based shaping of the critic
        that leaves the policy's optimum unchanged; the `dt_shaped_mix` arm of `coda bench round`); "bc": behaviour
        cloning on the BC demos only (the `dt_mix` arm of `coda bench round`;
        the rollouts still train the critic). When the updates fail or are cancelled (an exception from `progress`), the policy
        before them is put back. `replicate` > 0 reseeds the update's sampling (the replay generator and torch) from
        (replicate, step): another training replicate of the same update on the same data; 0 keeps the state's own
        streams. `takeover_scenes`: the policy (mean actions) is rolled out once in each, and where it fails the
        planner takes over at the failure's diagnosed step (`policy.takeover`: the env restored exactly there); the
        certified corrective windows — a reopen and regrasp after a missed grasp, a pick-up after a drop — join
        the BC data (info["takeover"]: planner calls, certified windows, takeover steps). `takeover_failed`: the
        same windows from the failed ones of the given rollouts themselves (their saved traces; one per scene), no
        new rollouts (info["takeover_rollouts"])."""
        if collect not in COLLECT:
            raise ValueError(f"collect must be one of {', '.join(COLLECT)}, got {collect!r}")
        with self.lock:
            state = self.require_state()
            self.check_rollouts(rollout_ids)
            episodes = [self.episode(r) for r in rollout_ids]
            if not episodes:
                raise ValueError("no rollouts to train on; collect rollouts first")
            specs = list({t.spec.spec_hash(): t.spec for t in map(self.trace, dict.fromkeys(rollout_ids))}.values()
                         ) if collect == "branch" and policy_updates else None
            if replicate:
                import torch

                state.rng = np.random.default_rng([replicate, state.step])
                torch.manual_seed(int(state.rng.integers(2**31)))
            try:
                return self._train(state, episodes, potentials, demo_families, demos_per_family, scene_demos,
                                   critic_updates, policy_updates, lora, progress, specs, programs, bc_successes,
                                   bc_only=collect == "bc", balance=balance, advantage="q" if collect == "critic" else None,
                                   takeover_scenes=takeover_scenes,
                                   takeover_from=[r for r in dict.fromkeys(rollout_ids) if takeover_failed
                                                  and not self.episode(r).success])
            except BaseException:
                self._restore()
                raise

    def _takeover_windows(self, state: TrainState, specs: Sequence[SceneSpec]) -> tuple[list[Episode], dict]:
        """The certified planner windows from the diagnosed steps of the policy's failures in `specs` (one mean
        rollout per scene, env seed 0) and their stats."""
        was = state.policy.training
        state.policy.eval()
        try:
            episodes = rollout(list(specs), chunk_fn(state.policy, None, mode="mean"), device=state.device,
                               record=True, seeds=[0] * len(specs), executor=self.executor)
        finally:
            state.policy.train(was)
        windows, stats = takeover_demos(episodes, "diagnosed", seed=state.step)
        stats = {"scenes": len(specs), "failed": sum(not e.success for e in episodes), **stats}
        return windows, stats

    def _train(self, state: TrainState, episodes: list[Episode], potentials: dict[str, list[float]] | None,
               demo_families: Sequence[str], demos_per_family: int, scene_demos: Sequence[SceneSpec],
               critic_updates: int, policy_updates: int, lora: bool, progress: Progress | None,
               branch_specs: list[SceneSpec] | None = None, programs: Mapping[str, str] | None = None,
               bc_successes: bool = False, bc_only: bool = False, advantage: str | None = None,
               balance: bool = False, takeover_scenes: Sequence[SceneSpec] = (),
               takeover_from: Sequence[str] = ()) -> dict:
        if lora and state.extra.get("lora") is None:
            from policy.lora import add_lora

            state.policy = add_lora(state.policy)
            state.reset_policy_optimizer()
            state.extra["lora"] = True
        pot: Callable[[Episode], list[float]] | None = None
        if potentials:
            table = {id(self.episode(r)): v for r, v in potentials.items()}

            def pot(ep: Episode) -> list[float]:
                return table.get(id(ep), [0.0] * (ep.steps + 1))

        base_side = state.extra.get("distribution", "train")  # the base's demos come from its own distribution
        demos = ([d for f in demo_families for d in self.demos_for(f, demos_per_family, base_side, policy_robot(state))]
                 if demos_per_family else [])
        own = self.demos_for_scenes(scene_demos) if scene_demos else []
        wins = list({id(ep): ep for ep in episodes if ep.success}.values()) if bc_successes else []
        windows, takeover = self._takeover_windows(state, takeover_scenes) if takeover_scenes else ([], None)
        if takeover_from:  # the given failed rollouts, restored from their traces
            failed = [dataclasses.replace(self.episode(r), trace=self.trace(r)) for r in takeover_from]
            own_windows, takeover_rollouts = takeover_demos(failed, "diagnosed", seed=state.step)
            windows = windows + own_windows
        bc = demos + own + wins + windows  # family demos, planner demos of scenes, own successes, corrective windows
        if balance:
            bc = balance_families(bc)
        if bc_only and policy_updates and not bc:
            raise ValueError("collect='bc' needs demonstrations: give demo_families, demo_scene_ids or "
                             "bc_successes with successful rollouts")
        config = state.train_config
        if advantage is not None:  # this round's policy updates only; checkpoints keep the configured advantage
            state.train_config = dataclasses.replace(config, advantage=advantage)
        with torch_threads(self.train_threads):
            try:
                info = awr_round(state, [], episodes=episodes, demos=bc or None, critic_updates=critic_updates,
                                 policy_updates=0 if branch_specs or bc_only else policy_updates, potential=pot,
                                 progress=progress)
            finally:
                state.train_config = config
            if bc_only and policy_updates:
                info["bc"] = bc_finetune(state, demo_buffer(bc), policy_updates, progress).summary()
        if branch_specs:
            from sim.potential import state_potential

            phi = {s.spec_hash(): state_potential(programs[s.spec_hash()], s)
                   for s in branch_specs if s.spec_hash() in (programs or {})}
            info["branch"] = branch_round(state, branch_specs, policy_updates=policy_updates,
                                          demos=bc or None, seed=state.step, phi=phi)
        info["shaped_rollouts"] = len(potentials or {})
        info["scene_demos"] = len(own)
        if takeover is not None:
            info["takeover"] = takeover
        if takeover_from:
            info["takeover_rollouts"] = {"failed": len(takeover_from), **takeover_rollouts}
        info["bc_successes"] = len(wins)
        info["checkpoint"] = Path(self.save(f"step{state.step:06d}")).stem
        return info

    def evaluate_external(self, tasks: Sequence[str], n: int, seeds: int = 1, *, first_group: int = 0,
                          mode: str = "mean", workers: int = 1, evidence: bool = False) -> list[dict]:
        """The policy on external benchmark tasks ('robosuite:Lift', ...; `policy.external.evaluate`): one row per
        task in the suite rows' shape; with `evidence`, each row's failed episodes carry their rollout evidence
        and objects at reset (for the failure critic and scenes aimed at them)."""
        from policy.external import parse_external
        from policy.external.base import external_python
        from policy.external.evaluate import evaluate_external

        targets = parse_external(" ".join(tasks))
        for benchmark in dict.fromkeys(b for b, _ in targets):
            external_python(benchmark)  # one line naming scripts/setup --external when the venv is missing
        with self.lock:
            state = self.require_state()
            return evaluate_external(state.policy, targets, n, seeds, critic=state.critic, mode=mode,
                                     device=state.device, workers=workers, first_group=first_group,
                                     evidence=evidence)["suites"]

    def evaluate(self, families: Sequence[str], suites: Sequence[str], n: int, mode: str = "mean") -> list[dict]:
        with self.lock:
            state = self.require_state()
            return [evaluate(state.policy, f, s, n, critic=state.critic, mode=mode, device=state.device,
                             executor=self.executor, robot=policy_robot(state))
                    for f in families for s in suites]
