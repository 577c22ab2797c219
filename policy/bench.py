"""Policy speed: BC / AWR / critic updates per second and batched vs unbatched chunk inference.

Run as `coda bench policy --json`. Data are synthetic observations with the env's layout, so the figures
measure the networks, not the simulator. Devices: cpu, plus cuda when present.
"""

from __future__ import annotations

import argparse
import logging
import time

import numpy as np
import torch

from sim.bench import at_least, names_list
from sim.constants import ACTION_DIM, CHUNK, MAX_DPOS, MAX_OBJECTS, OBJ_DIM, PROPRIO_DIM
from sim.env import make_observation, object_padding

from .awr import bc_update, critic_update, policy_update, select_chunk
from .checkpoint import build_train_state
from .config import AMP_MODES, BACKBONES, PolicyConfig, TrainConfig, autocast, resolve_device
from .data import (
    ACTION,
    DONE,
    IS_DEMO,
    N_STEPS,
    NEXT,
    PHI_NEXT,
    PHI_S,
    RETURN,
    REWARD,
    collate_obs,
    to_device,
)
from .text import get_embedder

log = logging.getLogger(__name__)

INSTRUCTIONS = ("put the mug in the bowl", "stack the red block on the blue block", "open the drawer")


def synthetic_observations(n: int, rng: np.random.Generator) -> list[dict]:
    """n observation dicts with the env's layout (random features, 1..MAX_OBJECTS real objects)."""
    out = []
    for _ in range(n):
        k = int(rng.integers(1, MAX_OBJECTS + 1))
        objects = rng.standard_normal((MAX_OBJECTS, OBJ_DIM)).astype(np.float32)
        mask, category = object_padding(rng.integers(0, 60, MAX_OBJECTS)[:k])
        objects *= mask[:, None]
        proprio = rng.standard_normal(PROPRIO_DIM).astype(np.float32)
        out.append(make_observation(objects, mask, category, proprio,
                                    INSTRUCTIONS[int(rng.integers(len(INSTRUCTIONS)))]))
    return out


def synthetic_transitions(n: int, rng: np.random.Generator, embedder=None,
                          device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
    """A transition batch of n random chunks (within limits) with next observations and potentials."""
    embedder = embedder or get_embedder("hash")
    batch = collate_obs(synthetic_observations(n, rng), embedder, device)
    nxt = collate_obs(synthetic_observations(n, rng), embedder, device)
    batch.update({NEXT + k: v for k, v in nxt.items() if k != "instruction_emb"})
    arrays = {
        ACTION: rng.uniform(-MAX_DPOS, MAX_DPOS, (n, CHUNK, ACTION_DIM)).astype(np.float32),
        REWARD: (rng.random(n) < 0.1).astype(np.float32),
        RETURN: rng.random(n).astype(np.float32),
        DONE: rng.random(n) < 0.1,
        PHI_S: rng.random(n).astype(np.float32),
        PHI_NEXT: rng.random(n).astype(np.float32),
        N_STEPS: np.full(n, CHUNK, dtype=np.int64),
        IS_DEMO: np.zeros(n, dtype=bool),
    }
    batch.update({k: torch.as_tensor(v, device=device) for k, v in arrays.items()})
    return batch


def _rate(fn, seconds: float, device: torch.device, warmup: int = 3) -> float:
    """Calls of fn per second over at least `seconds` (after warmup)."""
    for _ in range(warmup):
        fn()
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    calls, start = 0, time.perf_counter()
    while True:
        fn()
        calls += 1
        sync()
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return calls / elapsed


def bench_updates(cfg: PolicyConfig, device: torch.device, batch_size: int, seconds: float,
                  amp: str = "auto") -> dict[str, float]:
    state = build_train_state(cfg, TrainConfig(batch_size=batch_size, amp=amp), device=device)
    rng = np.random.default_rng(0)
    batch = to_device(synthetic_transitions(batch_size, rng), device)
    demos = to_device(synthetic_transitions(batch_size, rng), device)
    tc = state.train_config

    def amped(update):  # the training loops' autocast (bf16 on CUDA by default)
        def run():
            with autocast(tc, device):
                update()
        return run

    rates = {
        "bc_updates_per_s": _rate(amped(lambda: bc_update(state.policy, state.policy_optimizer, demos, tc)),
                                  seconds, device),
        "awr_updates_per_s": _rate(amped(lambda: policy_update(state.policy, state.policy_optimizer, batch,
                                                               state.critic, tc, demos)), seconds, device),
        "critic_updates_per_s": _rate(amped(lambda: critic_update(state.critic, state.critic_target, state.policy,
                                                                  state.critic_optimizer, batch, tc)), seconds, device),
    }
    return {**rates, "bc_samples_per_s": rates["bc_updates_per_s"] * batch_size}


def bench_inference(cfg: PolicyConfig, device: torch.device, n_envs: int, j: int, seconds: float) -> dict[str, float]:
    """Chunks/s for n_envs observations: one batched select_chunk vs n_envs calls with B = 1 (incl. collate)."""
    state = build_train_state(cfg, TrainConfig(), device=device)
    policy, critic = state.policy.eval(), state.critic.eval()
    embedder = get_embedder("hash")
    obs = synthetic_observations(n_envs, np.random.default_rng(1))

    def batched():
        select_chunk(policy, critic, collate_obs(obs, embedder, device), j, cfg.q_temperature)

    def unbatched():
        for o in obs:
            select_chunk(policy, critic, collate_obs([o], embedder, device), j, cfg.q_temperature)

    b = _rate(batched, seconds, device) * n_envs
    u = _rate(unbatched, seconds, device) * n_envs
    return {"batched_chunks_per_s": b, "unbatched_chunks_per_s": u, "batched_speedup": b / u}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--batch-size", type=at_least(1), default=256, help="transitions per update")
    parser.add_argument("--seconds", type=_positive_seconds, default=2.0, help="minimum timing window per figure")
    parser.add_argument("--backbones", type=names_list(BACKBONES, "backbones"), default=",".join(BACKBONES),
                        help="comma-separated backbones")
    parser.add_argument("--devices", type=_devices, default="auto",
                        help="'auto' (cpu, plus cuda if present) or a list, e.g. cpu")
    parser.add_argument("--envs", type=at_least(1), default=16, help="environments per batched inference call")
    parser.add_argument("--candidates", type=at_least(1), default=8, help="chunks sampled per decision (j)")
    parser.add_argument("--d-model", type=at_least(1), default=128)
    parser.add_argument("--layers", type=at_least(1), default=2)
    parser.add_argument("--amp", type=names_list(AMP_MODES, "amp modes"), default="auto",
                        help="auto (bf16 on CUDA) | bf16 | off; 'auto,off' compares both")


def _positive_seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not seconds > 0 or seconds == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return seconds


def _devices(text: str) -> list[str]:
    """argparse type for --devices: 'auto' is cpu plus cuda when present; a named device must exist here (a typo
    or a missing GPU fails at once, not as a torch error after the first figures)."""
    if text.strip() == "auto":
        return ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    names = [d.strip() for d in text.split(",") if d.strip()]
    if not names:
        raise argparse.ArgumentTypeError("expected 'auto' or comma-separated devices, e.g. cpu,cuda")
    for name in names:
        try:
            resolve_device(name)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return names


def run(args: argparse.Namespace) -> dict:
    devices = args.devices
    result: dict = {"torch": torch.__version__, "threads": torch.get_num_threads(), "batch_size": args.batch_size,
                    "d_model": args.d_model, "layers": args.layers, "envs": args.envs, "candidates": args.candidates}
    if "cuda" in devices:
        result["gpu"] = torch.cuda.get_device_name(0)
    for backbone in args.backbones:
        cfg = PolicyConfig(backbone=backbone, d_model=args.d_model, n_layers=args.layers, n_candidates=args.candidates)
        for name in devices:
            device = torch.device(name)
            figures = bench_inference(cfg, device, args.envs, args.candidates, args.seconds)
            for amp in args.amp:
                tag = "" if amp == "auto" else f".amp_{amp}"
                figures.update({k + tag: v for k, v in bench_updates(cfg, device, args.batch_size, args.seconds,
                                                                      amp).items()})
            log.info("%s on %s: %s", backbone, name, figures)
            result.update({f"{backbone}.{name}.{k}": round(v, 2) for k, v in figures.items()})
    return result
