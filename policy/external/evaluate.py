"""A policy on external benchmark tasks: success rate ± standard error per task, as `policy.evaluate` reports a
suite, and optionally a rollout GIF per task.

The policy runs here, one batched forward pass per chunk boundary for all live episodes; each of `workers`
adapters (one external worker process each) runs one episode at a time, and the adapters step in parallel.
Episode e of seed group k resets the benchmark with seed k * SEED_STRIDE + e (re-seeding robosuite's own
generators), whichever worker runs it.

Each task's row also carries the failure analysis by phase where the adapter tracks it (`policy.external.phases`):
`phases` (episodes by the furthest phase reached), `phases_reached`, `mean_min_tcp_obj_dist`,
`mean_final_obj_displacement`, `closed_near_object` and `episodes` (per episode: seed, success, steps, phase,
reached, min_tcp_obj_dist, closest_offset, final_obj_displacement, ...).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from policy.external import make_adapter

SEED_STRIDE = 100_000
"""reset seed of episode e in seed group k: k * SEED_STRIDE + e"""


@dataclass
class ExternalEpisode:
    task: str
    seed: int
    success: bool
    steps: int
    external_steps: int
    phase: dict | None = None
    """how far it got, from the external simulator's state (`policy.external.phases.PhaseTracker.report`)"""
    phase_kind: str | None = None
    start: list[dict] | None = None
    """with `evidence`: the objects at reset (`WorkerAdapter.start_objects`)"""
    start_robot: dict | None = None
    """with `evidence`: where the hand started (`WorkerAdapter.start_robot`, a `sim.spec.RobotStart`)"""
    evidence: dict | None = None
    """with `evidence`, for a failed episode: its rollout evidence (`policy.external.evidence`, as JSON)"""


def episode_seeds(n: int, seeds: int, first_group: int = 0) -> list[int]:
    return [k * SEED_STRIDE + e for k in range(first_group, first_group + seeds) for e in range(n)]


def run_task(act, benchmark: str, task: str, seeds: list[int], *, workers: int = 1, device="cpu", embedder=None,
             gif: Path | None = None, adapter_kwargs: dict | None = None, execute: int | None = None,
             evidence: bool = False) -> tuple[list[ExternalEpisode], dict]:
    """One episode per seed of `task` with the chunk function `act` (`policy.rollout.chunk_fn`); returns the
    episodes in seed order and timing figures. With `gif`, the first episode is rendered there; with `evidence`,
    each episode keeps its objects at reset and a failed one its rollout evidence (for the failure critic)."""
    from policy.data import collate_obs
    from policy.text import get_embedder
    from sim.constants import CHUNK

    execute = execute or CHUNK
    embedder = embedder or get_embedder()
    workers = max(1, min(workers, len(seeds)))
    kwargs = dict(adapter_kwargs or {})
    t0 = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:  # worker start-up (import + make) is seconds each: overlap it
        futures = [pool.submit(make_adapter, benchmark, task, **kwargs, render=(gif is not None and w == 0))
                   for w in range(workers)]
        adapters = []
        try:
            adapters = [f.result() for f in futures]
        except BaseException:
            for f in futures:
                if f.exception() is None:
                    f.result().close()
            raise
    t_make = time.perf_counter() - t0
    family, template = adapters[0].family, getattr(adapters[0], "template", "")
    episodes: list[ExternalEpisode | None] = [None] * len(seeds)
    frames: list[np.ndarray] = []
    external_steps, t_step = 0, 0.0
    try:
        queue = list(range(len(seeds)))
        current: dict[int, tuple[int, dict, int]] = {}  # adapter -> (episode index, obs, external steps)

        def start(w: int) -> None:
            if not queue:
                return
            e = queue.pop(0)
            obs = adapters[w].reset(seeds[e])
            if gif is not None and w == 0 and e == 0:
                frames.append(adapters[w].render())
            current[w] = (e, obs, 0)

        for w in range(len(adapters)):
            start(w)
        while current:
            live = sorted(current)
            batch = collate_obs([current[w][1] for w in live], embedder, device)
            chunks = act(batch).detach().cpu().numpy()
            ts = time.perf_counter()
            for k, w in enumerate(live):
                adapters[w].begin_chunk(chunks[k][:execute], render=(gif is not None and w == 0
                                                                     and current[w][0] == 0))
            for w in live:
                e, _, ext = current[w]
                obs, _, terminated, truncated, info = adapters[w].end_chunk()
                ext += info["external_steps"]
                external_steps += info["external_steps"]
                if info.get("frames") is not None:
                    frames.extend(info["frames"])
                if terminated or truncated:
                    a = adapters[w]
                    episodes[e] = ExternalEpisode(task, seeds[e], bool(info["success"]), a.steps, ext,
                                                  a.phase_report(), a.phase_kind)
                    if evidence:
                        episodes[e].start, episodes[e].start_robot = a.start_objects(), a.start_robot()
                        if not info["success"]:
                            ev = a.evidence(rollout_id=f"{benchmark}-{task}-{seeds[e]}")
                            episodes[e].evidence = ev.model_dump(mode="json")
                    del current[w]
                    start(w)
                else:
                    current[w] = (e, obs, ext)
            t_step += time.perf_counter() - ts
    finally:
        for a in adapters:
            a.close()
    if gif is not None and frames:
        write_gif(gif, frames)
    timing = {"family": family, "template": template, "seconds": round(time.perf_counter() - t0, 2), "make_seconds": round(t_make, 2),
              "external_steps": external_steps,
              "external_steps_per_s": round(external_steps / t_step, 1) if t_step else 0.0}
    return [e for e in episodes if e is not None], timing


def phase_fields(episodes: list[ExternalEpisode]) -> dict:
    """The failure analysis of one task's episodes: the phase histogram and means (`phases.summarize`) and, per
    episode, its seed, success, steps and phase report; {} when the adapter tracks no phases."""
    from policy.external.phases import summarize

    if not episodes or any(e.phase is None for e in episodes):
        return {}
    out = summarize(episodes[0].phase_kind, [e.phase for e in episodes])
    out["episodes"] = [{"seed": e.seed, "success": e.success, "steps": e.steps, **e.phase} for e in episodes]
    return out


def write_gif(path: Path, frames: list[np.ndarray], ms: int = 100) -> Path:
    from PIL import Image

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    images = [Image.fromarray(np.asarray(f, dtype=np.uint8)) for f in frames]
    images[0].save(path, save_all=True, append_images=images[1:], duration=ms, loop=0, optimize=True)
    return path


def evaluate_external(policy, targets: list[tuple[str, str]], n: int, seeds: int = 1, *, critic=None,
                      mode: str = "mean", device="cpu", workers: int = 1, gif_dir: Path | None = None,
                      adapter_kwargs: dict | None = None, first_group: int = 0, evidence: bool = False) -> dict:
    """Per (benchmark, task): n episodes per seed group, `seeds` groups from `first_group` on; the suite-shaped
    result (n, success_rate, stderr, mean_steps, outcomes) plus the success rate of each seed group. With
    `evidence`, each row lists its failed episodes under `failures` (seed, objects at reset, rollout evidence)."""
    from policy.evaluate import success_stats
    from policy.rollout import chunk_fn

    act = chunk_fn(policy, critic, mode=mode)
    suites, everything = [], []
    for benchmark, task in targets:
        gif = Path(gif_dir) / f"{benchmark}_{task}.gif" if gif_dir is not None else None
        episodes, timing = run_task(act, benchmark, task, episode_seeds(n, seeds, first_group), workers=workers,
                                    device=device, gif=gif, adapter_kwargs=adapter_kwargs, evidence=evidence)
        everything += episodes
        groups = [episodes[k * n : (k + 1) * n] for k in range(seeds)]
        row = {"family": timing.pop("family"), "template": timing.pop("template"), "suite": f"{benchmark}:{task}",
               "benchmark": benchmark, "task": task, **success_stats(episodes),
               "per_seed": [success_stats(g)["success_rate"] for g in groups],
               "mean_external_steps": round(sum(e.external_steps for e in episodes) / max(len(episodes), 1), 1),
               **timing}
        if gif is not None:
            row["gif"] = str(gif)
        row.update(phase_fields(episodes))
        if evidence:
            row["failures"] = [{"seed": e.seed, "start": e.start, "start_robot": e.start_robot, "evidence": e.evidence}
                               for e in episodes if not e.success]
        suites.append(row)
    return {"suites": suites, "total": success_stats(everything)}
