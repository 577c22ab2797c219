"""A shared round 1 per seed (`Preset.share_round0`, protocol v2.1).

Round 1 of CoDA, uniform and success-guided is one computation: novel seed scenes, the base policy's rollouts in
them and one update on the same data (the methods only differ from round 2 on, once there are diagnoses or
measured success rates to act on). An experiment with `share_round0` runs it once per seed, as a `uniform` run
stopped after its first round (`shared/round0-<backbone>-s<seed>`), and each such cell starts as a copy of that
run taken before its update: its scenes, rollouts, traces and memory, the base policy current, the steps up to
the rollouts done. The cell then does its own round-1 work (CoDA intervenes on and diagnoses the failures), and
its round-1 update loads the shared checkpoint only if its training arguments have the shared update's digest
(`CoEvolution.train`); otherwise it trains itself. Every such cell continues from the loaded checkpoint, so the
methods of a seed share round 1 exactly and their differences do not carry round 1's run-to-run variation.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from agent.experiment.common import say, write_json

SHARED_METHOD = "uniform"
"""the method whose first round is run as the shared one (blind: it writes nothing to memory after its rollouts)"""
SHARED_STEPS = ("seed.sft", "eval.before", "r0.generate", "r0.rollouts")
"""the steps a cell takes over from the shared run; the rest of round 1 it runs itself"""
COPIED = ("scenes", "rollouts", "traces", "memory", "checkpoints")
"""the run folders a cell copies: the sim's scene store, the trainer's rollouts and checkpoints, the memory"""
LATEST, BASE = "latest.pt", "base.pt"
ROUND0_FIELDS = ("families", "robot", "seed_scenes_per_family", "eval_per_suite", "base_eval_in")
"""the preset fields the steps a cell takes over depend on (with `Preset.round_rollout_args`); a shared round run
with other values is another round 1"""


def round0_changes(recorded: dict, preset) -> list[str]:
    """The fields in which `preset` would make another round 1 than the shared run's recorded preset did."""
    from agent.presets import Preset

    then = Preset.from_dict(recorded)
    out = [f for f in ROUND0_FIELDS if getattr(then, f) != getattr(preset, f)]
    return out + (["round_rollouts"] if then.round_rollout_args() != preset.round_rollout_args() else [])


def shares_round0(method, preset) -> bool:
    """Whether `method`'s round 1 is the shared one under `preset`: a method whose round 1 is the common computation
    (`Method.shares_round0`) and whose round rollouts are the shared run's (success-guided keeps sampled rollouts
    when the preset's are the mean action's: `Preset.round_rollout_args`)."""
    return method.shares_round0 and (preset.round_rollout_args(sampled=method.samples_rollouts)
                                     == preset.round_rollout_args())


def shared_dir(out: Path, seed: int, backbone: str) -> Path:
    return Path(out) / "shared" / f"round0-{backbone}-s{seed}"


def ensure_round0(out: Path, preset, seed: int, base: dict, *, backbone: str, embedder: str | None = None,
                  backend: str = "offline") -> dict | None:
    """The shared round 1 of a seed, run once (resumable like any run). Returns {"dir", "train", "eval",
    "seconds"}: the folder, round 1's training result (with its checkpoint and argument digest) and evaluation;
    None when that round made no update (nothing to share: each cell then runs its round 1 itself)."""
    from agent.experiment.cells import install_base, server_args
    from agent.hub import Hub, stdio_specs
    from agent.loop import CoEvolution
    from agent.methods import get_method
    from agent.roles.factory import make_roles

    d = shared_dir(out, seed, backbone)
    meta = d / "shared.json"
    if meta.exists():
        info = json.loads(meta.read_text())
        if info.get("base_sha") != base.get("sha"):
            raise ValueError(f"{d} was run from another base policy ({info.get('base_sha')}, not {base.get('sha')}): "
                             "move it aside to run the shared round again from this base")
        changed = round0_changes(json.loads((d / "state.json").read_text()).get("preset", {}), preset)
        if changed:
            raise ValueError(f"{d} was run with other {', '.join(changed)}: its round 1 is not this preset's; use "
                             "another --out or move it aside to run the shared round again")
        return {**info, "dir": str(d)}
    say(f"shared round 1 of seed {seed} ({SHARED_METHOD}, used by every method whose round 1 is the same)")
    t0 = time.perf_counter()
    with Hub(stdio_specs(d, extra_args=server_args(base, embedder), robot=preset.robot)) as hub:
        install_base(hub, base)
        loop = CoEvolution(hub, make_roles(backend), d, preset, f"round0-s{seed}", method=get_method(SHARED_METHOD),
                           seed=seed, base={"tag": "base", "eval": base["eval"], "external": base.get("external")},
                           early_stop=False)
        state = loop.first_round()
    train, ev = state["steps"]["r0.train"]["result"], state["steps"]["r0.eval"]["result"]
    if "checkpoint" not in train:
        say(f"the shared round 1 of seed {seed} made no update ({train}): each cell runs its own round 1")
        return None
    info = {"seed": seed, "backbone": backbone, "base_sha": base.get("sha"), "method": SHARED_METHOD,
            "train": train, "eval": ev, "seconds": round(time.perf_counter() - t0, 1),
            "finished": time.strftime("%Y-%m-%d %H:%M:%S")}
    write_json(meta, info)
    return {**info, "dir": str(d)}


def adopt_round0(run_dir: Path, shared: dict) -> bool:
    """Start a new cell's run folder as a copy of the shared run before its update (see the module docstring).
    A cell that already has a state (a resumed cell) keeps its own: returns False."""
    run_dir, src = Path(run_dir), Path(shared["dir"])
    if (run_dir / "state.json").exists():
        return False
    state = json.loads((src / "state.json").read_text())
    missing = [k for k in SHARED_STEPS if k not in state["steps"]]
    if missing:
        raise RuntimeError(f"{src} lacks the steps {', '.join(missing)}; it is not a finished shared round")
    tmp = run_dir.with_name(run_dir.name + ".adopting")
    shutil.rmtree(tmp, ignore_errors=True)
    for name in COPIED:
        if (src / name).exists():
            shutil.copytree(src / name, tmp / name)
    ckpt = tmp / "checkpoints"
    shutil.copyfile(ckpt / BASE, ckpt / LATEST)  # the policy before round 1's update is current
    steps = {k: {**state["steps"][k], "shared": True} for k in SHARED_STEPS}
    write_json(tmp / "state.json", {"steps": steps, "order": list(SHARED_STEPS), "created": time.time(),
                                    "shared_round0": str(src)})
    if run_dir.exists():  # a folder without a state: nothing of this cell ran yet
        shutil.rmtree(run_dir)
    tmp.rename(run_dir)
    return True
