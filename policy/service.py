"""The trainer as a long-lived service (what the trainer MCP server wraps): one policy per run directory.

It keeps the current TrainState, planner demonstrations and own rollouts (with replayable traces on disk), and
offers the operations of a round: base SFT, rollouts, critic + AWR training with optional potentials, evaluation,
and checkpoints. Everything is keyed by ids so a client can refer to rollouts across calls.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from policy.checkpoint import TrainState, load_checkpoint, save_checkpoint
from policy.config import PolicyConfig, TrainConfig
from policy.data import stack_obs
from policy.evaluate import evaluate, train_specs
from policy.improve import awr_round, collect
from policy.rollout import Episode, planner_demos
from policy.train import Progress, train_sft
from sim.constants import OBS_INSTRUCTION
from sim.spec import SceneSpec
from sim.trace import Trace

log = logging.getLogger(__name__)

LATEST = "latest.pt"


class TrainerService:
    def __init__(self, run_dir: Path | str, policy_config: PolicyConfig | None = None,
                 train_config: TrainConfig | None = None, device=None):
        self.run_dir = Path(run_dir)
        self.ckpt_dir = self.run_dir / "checkpoints"
        self.rollout_dir = self.run_dir / "rollouts"
        self.ckpt_dir.mkdir(parents=True, exist_ok=True)
        self.rollout_dir.mkdir(parents=True, exist_ok=True)
        self.pcfg = policy_config or PolicyConfig()
        self.tcfg = train_config or TrainConfig()
        self.device = device
        self.lock = threading.RLock()
        self.state: TrainState | None = None
        self.demos: dict[str, list[Episode]] = {}
        self.episodes: dict[str, Episode] = {}
        if (self.ckpt_dir / LATEST).exists():
            self.state = load_checkpoint(self.ckpt_dir / LATEST, device=device)

    # --- policy lifecycle -------------------------------------------------------------------
    def require_state(self) -> TrainState:
        if self.state is None:
            raise RuntimeError("no policy yet: run the base SFT first (train_sft) or load a checkpoint")
        return self.state

    def demos_for(self, family: str, n: int) -> list[Episode]:
        key = f"{family}:{n}"
        if key not in self.demos:
            self.demos[key] = planner_demos(train_specs(family, n, start=300_000))
        return self.demos[key]

    def sft(self, families: Sequence[str], demos_per_family: int, updates: int,
            progress: Progress | None = None) -> dict:
        """Base policy: behaviour cloning on planner demonstrations of the given families."""
        with self.lock:
            demos = [d for f in families for d in self.demos_for(f, demos_per_family)]
            state, tlog = train_sft(demos, self.pcfg, self.tcfg, updates, progress=progress, device=self.device)
            state.extra.update({"kind": "sft", "families": list(families), "demos": len(demos)})
            self.state = state
            self.save("base")
            return {"demos": len(demos), **tlog.summary()}

    def save(self, tag: str) -> str:
        state = self.require_state()
        path = save_checkpoint(self.ckpt_dir / f"{tag}.pt", state)
        save_checkpoint(self.ckpt_dir / LATEST, state)
        return str(path)

    def load(self, tag: str) -> None:
        path = self.ckpt_dir / (tag if tag.endswith(".pt") else f"{tag}.pt")
        if not path.exists():
            raise FileNotFoundError(f"no checkpoint {path.name}; available: {self.checkpoints()}")
        self.state = load_checkpoint(path, device=self.device)

    def checkpoints(self) -> list[str]:
        return sorted(p.stem for p in self.ckpt_dir.glob("*.pt"))

    # --- rollouts ---------------------------------------------------------------------------
    def rollouts(self, specs: Sequence[SceneSpec], per_scene: int = 1, mode: str = "sample", seed: int = 0,
                 tag: str = "r") -> list[dict]:
        """Roll the current policy out; each episode is kept (and its trace saved) under a rollout id."""
        with self.lock:
            state = self.require_state()
            episodes = collect(state, specs, per_scene, mode=mode, seed=seed, record=True)
            out = []
            for i, ep in enumerate(episodes):
                rid = f"{tag}-{seed}-{i:04d}-{ep.spec_hash[:8]}"
                self.episodes[rid] = ep
                self._save_episode(rid, ep)
                out.append({"rollout_id": rid, "scene_id": ep.spec_hash, "success": ep.success, "steps": ep.steps})
            return out

    def _save_episode(self, rid: str, ep: Episode) -> None:
        arrays = stack_obs(ep.observations)
        arrays = {k: v for k, v in arrays.items() if k != OBS_INSTRUCTION}
        np.savez_compressed(self.rollout_dir / f"{rid}.npz", actions=ep.actions, **arrays)
        if ep.trace is not None:
            (self.rollout_dir / f"{rid}.trace").write_bytes(ep.trace.to_bytes())
        meta = {"spec_hash": ep.spec_hash, "family": ep.family, "success": ep.success, "steps": ep.steps,
                "instruction": ep.observations[0][OBS_INSTRUCTION]}
        (self.rollout_dir / f"{rid}.json").write_text(json.dumps(meta))

    def trace(self, rid: str) -> Trace:
        ep = self.episodes.get(rid)
        if ep is not None and ep.trace is not None:
            return ep.trace
        path = self.rollout_dir / f"{rid}.trace"
        if not path.exists():
            raise KeyError(f"unknown rollout id {rid!r}; collect rollouts first")
        return Trace.from_bytes(path.read_bytes())

    def episode(self, rid: str) -> Episode:
        if rid in self.episodes:
            return self.episodes[rid]
        meta_path = self.rollout_dir / f"{rid}.json"
        if not meta_path.exists():
            raise KeyError(f"unknown rollout id {rid!r}; collect rollouts first")
        meta = json.loads(meta_path.read_text())
        z = np.load(self.rollout_dir / f"{rid}.npz")
        keys = [k for k in z.files if k != "actions"]
        obs = [{**{k: z[k][t] for k in keys}, OBS_INSTRUCTION: meta["instruction"]} for t in range(len(z["actions"]) + 1)]
        ep = Episode(meta["spec_hash"], meta["family"], obs, z["actions"], meta["success"], meta["steps"])
        self.episodes[rid] = ep
        return ep

    # --- training ---------------------------------------------------------------------------
    def train(self, rollout_ids: Sequence[str], *, potentials: dict[str, list[float]] | None = None,
              demo_families: Sequence[str] = (), demos_per_family: int = 0, critic_updates: int = 200,
              policy_updates: int = 200, lora: bool = False, progress: Progress | None = None) -> dict:
        """Critic + AWR updates on the given rollouts (shaped by per-rollout potentials when given)."""
        with self.lock:
            state = self.require_state()
            episodes = [self.episode(r) for r in rollout_ids]
            if not episodes:
                raise ValueError("no rollouts to train on; collect rollouts first")
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

            demos = [d for f in demo_families for d in self.demos_for(f, demos_per_family)] if demos_per_family else None
            info = awr_round(state, [], episodes=episodes, demos=demos, critic_updates=critic_updates,
                             policy_updates=policy_updates, potential=pot, progress=progress)
            self.save(f"step{state.step:06d}")
            return info

    def evaluate(self, families: Sequence[str], suites: Sequence[str], n: int, mode: str = "mean") -> list[dict]:
        with self.lock:
            state = self.require_state()
            return [evaluate(state.policy, f, s, n, critic=state.critic, mode=mode, device=state.device)
                    for f in families for s in suites]
