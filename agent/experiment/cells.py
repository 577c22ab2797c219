"""Running cells: the shared base policy of a seed (made by the trainer server), one (method, seed) cell through
the four MCP servers, and the program-transfer cell."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

from agent.choices import default_workers
from agent.experiment.common import DEFAULT_BACKBONE, cell_name, code_commit, say, write_json
from agent.experiment.metrics import base_mark, mean_ood, same_base, summarize
from agent.hub import ServerSpec
from agent.methods import get_method
from agent.presets import Preset
from sim.constants import SUITES

THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
"""thread settings of this process that the base policy's trainer server gets (MCP's stdio client passes a
server only a short list of variables, and the SFT's arithmetic depends on the thread count)"""


class BaseTrainer(ServerSpec):
    """The stdio trainer server of a base directory, with this process's thread settings: the base policy trains
    as it would in this process (the same weights for the same seed)."""

    def __init__(self, spec: ServerSpec):
        super().__init__(name=spec.name, command=spec.command, args=list(spec.args))

    def target(self):
        params = super().target()
        params.env = {k: os.environ[k] for k in THREAD_ENV if k in os.environ}
        return params


def base_fields(preset: Preset) -> dict:
    seed_side = {"base_distribution": "seed"} if preset.base_distribution == "seed" else {}
    body = {"robot": preset.robot} if preset.robot != "gripper" else {}
    return {"families": list(preset.families), "demos_per_family": preset.demos_per_family,
            "sft_updates": preset.sft_updates, "eval_per_suite": preset.eval_per_suite, **seed_side, **body}


def ensure_base(out: Path, preset: Preset, seed: int, backbone: str = DEFAULT_BACKBONE) -> dict:
    """The base policy of a seed (SFT on the seed demonstrations) and its evaluation, trained once per experiment
    and reused by every cell of that seed. Returns {"checkpoint", "eval", "seconds"}."""
    from agent.hub import Hub, stdio_specs
    from agent.loop import run_job

    d = out / "base" / f"{backbone}-s{seed}"
    ckpt, ev, meta = d / "checkpoints" / "base.pt", d / "eval.json", d / "meta.json"
    want = {**base_fields(preset), "seed": seed, "backbone": backbone}
    if meta.exists() and json.loads(meta.read_text()).get("config") != want:
        raise ValueError(f"{d} holds a base policy for another configuration; use another --out")
    if ckpt.exists() and ev.exists():
        base = {"checkpoint": str(ckpt), "eval": json.loads(ev.read_text()),
                "seconds": json.loads(meta.read_text()).get("seconds", 0.0), "sha": file_sha(ckpt)}
        check_cells_base(out, seed, backbone, base)
        return {**base, **base_external(d, preset)}
    say(f"base policy {backbone} seed {seed}: SFT on {preset.demos_per_family} demos per family, "
        f"{preset.sft_updates} updates")
    t0 = time.perf_counter()
    with Hub([BaseTrainer(spec) for spec in stdio_specs(d, names=("trainer",))]) as hub:
        if not ckpt.exists():
            run_job(hub, "train_sft", families=list(preset.families), demos_per_family=preset.demos_per_family,
                    updates=preset.sft_updates, backbone=backbone, seed=seed, distribution=preset.base_distribution,
                    robot=preset.robot)
        else:
            hub.call("trainer", "load_checkpoint", {"tag": "base"})
        result = run_job(hub, "evaluate", families=list(preset.families), suites=list(SUITES),
                         n=preset.eval_per_suite)
        if preset.base_distribution == "seed":  # the base's own distribution: what its competence is judged on
            result += run_job(hub, "evaluate", families=list(preset.families), suites=["seed"],
                              n=preset.base_eval_in)
    seconds = round(time.perf_counter() - t0, 1)
    write_json(meta, {"config": want, "seconds": seconds})
    write_json(ev, result)
    say(f"base {backbone} seed {seed}: mean OOD {100 * mean_ood(result):.1f}% ({seconds:.0f} s)")
    base = {"checkpoint": str(ckpt), "eval": result, "seconds": seconds, "sha": file_sha(ckpt)}
    check_cells_base(out, seed, backbone, base)
    return {**base, **base_external(d, preset)}


def file_sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def check_cells_base(out: Path, seed: int, backbone: str, base: dict) -> None:
    """Refuse to add cells to a seed whose finished cells started from another base policy (e.g. `base/` lost and
    retrained on another machine): their paired differences would mix two bases. The base stays saved, so moving
    those cells aside (or restoring the old `base/` folder) and resuming costs no retraining."""
    mark = base_mark(base["eval"], base["sha"])
    other = sorted(p.name for p in (out / "cells").glob(f"*-s{seed}.json")
                   if (c := json.loads(p.read_text())).get("seed") == seed and c.get("backbone", backbone) == backbone
                   and ("mean_ood_before" in c or c.get("base_sha")) and not same_base(c, mark))
    if other:
        raise ValueError(f"cells {', '.join(other)} of seed {seed} started from another base policy than "
                         f"{out / 'base' / f'{backbone}-s{seed}'}: move them out of {out / 'cells'} (to rerun them "
                         f"from this base) or restore the base folder they used, then resume")


def base_external(d: Path, preset: Preset) -> dict:
    """With external targets: the base policy on them (`external.json` of the base folder, made once per
    configuration of tasks and sizes), {"external": rows}; {} without."""
    from agent.hub import Hub, stdio_specs
    from agent.loop import run_job
    from agent.presets import external_tasks

    if not preset.external:
        return {}
    want = {"tasks": external_tasks(preset.external), "n": preset.external_eval_n, "seeds": preset.external_eval_seeds}
    path = d / "external.json"
    if path.exists():
        saved = json.loads(path.read_text())
        if saved.get("config") == want:
            return {"external": saved["result"]}
    say(f"base {d.name}: external targets {', '.join(want['tasks'])}")
    with Hub([BaseTrainer(spec) for spec in stdio_specs(d, names=("trainer",))]) as hub:
        hub.call("trainer", "load_checkpoint", {"tag": "base"})
        result = run_job(hub, "evaluate_external", tasks=want["tasks"], n=want["n"], seeds=want["seeds"])
    write_json(path, {"config": want, "result": result})
    return {"external": result}


def run_cell(out: Path, method: str, seed: int, preset: Preset, base: dict, *, backbone: str = DEFAULT_BACKBONE,
             memory_from: Path | None = None, embedder: str | None = None, backend: str = "offline") -> dict:
    """Run one (method, seed) cell through the four MCP servers, from the shared base policy. Returns its result
    (also written to DIR/cells/<cell>.json)."""
    from agent.hub import Hub, stdio_specs
    from agent.loop import CoEvolution
    from agent.roles.factory import make_roles

    name = cell_name(method, seed, backbone)
    run_dir = out / "runs" / name
    shared = None
    from agent.experiment.shared import adopt_round0, ensure_round0, shares_round0

    if preset.share_round0 and shares_round0(get_method(method), preset):
        shared = ensure_round0(out, preset, seed, base, backbone=backbone, embedder=embedder, backend=backend)
        if shared and adopt_round0(run_dir, shared):
            say(f"{name} starts from the shared round 1 of seed {seed}")
    with Hub(stdio_specs(run_dir, extra_args=server_args(base, embedder), robot=preset.robot)) as hub:
        install_base(hub, base)
        loop = CoEvolution(hub, make_roles(backend), run_dir, preset, name, method=get_method(method), seed=seed,
                           base={"tag": "base", "eval": base["eval"], "external": base.get("external")},
                           memory_from=memory_from, early_stop=False, shared_round0=shared)
        state = loop.run()
    try:
        from agent.report import write_report

        write_report(state, run_dir)
    except Exception as exc:  # noqa: BLE001 - the report is a convenience; the cell result is what counts
        say(f"report of {name} not written: {exc}")
    result = summarize(state, method=method, seed=seed, backbone=backbone, base=base, shared=shared)
    write_json(out / "cells" / f"{name}.json", result)
    return result


def load_programs(out: Path, seeds: list[int]) -> list[dict]:
    """Validated generation programs of the CoDA cells (from their memory exports), each with its mode's phase."""
    progs = []
    for s in seeds:
        exp = out / "runs" / cell_name("coda", s) / "exports" / "memory"
        if not (exp / "generation_programs.jsonl").exists():
            continue
        modes = {m["id"]: m for m in map(json.loads, (exp / "modes.jsonl").read_text().splitlines()) if m}
        for line in (exp / "generation_programs.jsonl").read_text().splitlines():
            g = json.loads(line)
            mode = modes.get(g["mode_id"], {})
            progs.append({**g, "phase": mode.get("phase"), "source_seed": s})
    return sorted(progs, key=lambda g: g["id"])


def run_program_transfer(out: Path, seed: int, preset: Preset, base: dict, programs: list[dict], *,
                         embedder: str | None = None) -> dict:
    """Learning progress on environments made by generation programs of the same family, of other families, and
    by uniform variants (scratch), per target family, each condition from the same base policy."""
    import numpy as np

    from agent.hub import Hub, stdio_specs
    from agent.loop import CoEvolution
    from agent.methods import uniform_variant
    from agent.roles.engine import OfflineEngine
    from agent.roles.factory import make_roles
    from memory_store.schema import GenerationProgram

    name = f"program_transfer-s{seed}"
    run_dir = out / "runs" / name
    engine = OfflineEngine()
    n_env, per_scene = preset.targeted_per_family, max(2, preset.rollouts_per_scene)
    results: dict[str, dict] = {}
    partial = run_dir / "partial.json"
    if partial.exists():
        results = json.loads(partial.read_text())
    with Hub(stdio_specs(run_dir, extra_args=server_args(base, embedder), robot=preset.robot)) as hub:
        install_base(hub, base)
        engine.connect(hub)
        loop = CoEvolution(hub, make_roles("offline"), run_dir, preset, name, seed=seed,
                           base={"tag": "base", "eval": base["eval"]})
        for fi, family in enumerate(preset.families):
            conditions = {"within": [g for g in programs if g["family"] == family],
                          "cross": [g for g in programs if g["family"] != family], "scratch": None}
            for cond, pool in conditions.items():
                key = f"{family}/{cond}"
                if key in results:
                    continue
                if pool is not None and not pool:
                    results[key] = {"programs": 0, "envs": 0, "lp": None}
                    write_json(partial, results)
                    continue
                rng = np.random.default_rng([seed, fi, len(key)])
                made, i = [], 0
                while len(made) < n_env and i < 8 * n_env:
                    spec = loop.family_scene(family, 700_000 + 10_000 * seed + 100 * fi + i)
                    if pool is None:
                        v = uniform_variant(engine, spec, rng)
                        made += [v] if v is not None else []
                    else:
                        g = pool[i % len(pool)]
                        prog = GenerationProgram.model_validate({k: v for k, v in g.items()
                                                                 if k not in ("phase", "source_seed")})
                        made += engine.apply_generation_program(prog, spec, 1, seed=i, phase=g["phase"])[:1]
                    i += 1
                scenes = [loop._create(90 + fi, pr, None) for pr in made]
                ids = [s["scene_id"] for s in scenes if s["verified"]]
                if not ids:
                    results[key] = {"programs": len(pool or []), "envs": 0, "lp": None}
                    write_json(partial, results)
                    continue
                loop.call("trainer", "load_checkpoint", tag="base")
                tag = f"t{fi}{cond[:2]}"
                before = loop.job("collect_rollouts", scene_ids=ids, per_scene=per_scene, seed=seed, tag=tag + "b")
                loop.job("start_training", rollout_ids=[x["rollout_id"] for x in before],
                         demo_families=list(preset.families), demos_per_family=max(1, preset.demos_per_family // 2),
                         critic_updates=preset.critic_updates, policy_updates=preset.policy_updates, lora=preset.lora)
                after = loop.job("collect_rollouts", scene_ids=ids, per_scene=per_scene, seed=seed + 1, tag=tag + "a")
                b = sum(x["success"] for x in before) / len(before)
                a = sum(x["success"] for x in after) / len(after)
                results[key] = {"programs": len(pool or []), "envs": len(ids), "before": b, "after": a, "lp": a - b}
                say(f"  program transfer {key}: {len(ids)} envs, success {b:.2f} -> {a:.2f}")
                write_json(partial, results)
    result = {"cell": name, "method": "program_transfer", "seed": seed, "backbone": DEFAULT_BACKBONE,
              "commit": code_commit(), "finished": time.strftime("%Y-%m-%d %H:%M:%S"), "conditions": results,
              "programs": [{k: g[k] for k in ("id", "family", "factor", "phase", "source_seed")} for g in programs]}
    write_json(out / "cells" / f"{name}.json", result)
    return result


def server_args(base: dict, embedder: str | None = None) -> dict[str, list[str]]:
    """Extra command-line arguments of a cell's servers: the trainer may install checkpoints from the base
    policy's folder, trains on one thread (as every cell of the protocols so far: the cells of a grid stay
    comparable, and cells may run beside other work) and simulates on `agent.choices.default_workers()`
    processes (which changes no episode); the memory server's embedder."""
    extra = {"trainer": ["--import-checkpoints", str(Path(base["checkpoint"]).parent), "--train-threads", "1",
                         "--workers", str(default_workers())]}
    return {**extra, "memory": ["--embedder", embedder]} if embedder else extra


def install_base(hub, base: dict) -> dict:
    """Install the shared base policy in the cell's trainer as checkpoint `base` (a resumed cell keeps its own)."""
    return hub.call("trainer", "install_checkpoint", {"name": Path(base["checkpoint"]).stem, "tag": "base"}).data
