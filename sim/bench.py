"""Simulator throughput: raw mj_step vs env control steps on the same scene and motions; compile and verify rates."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence

from sim.constants import FAMILIES, SUBSTEPS


def add_arguments(parser) -> None:
    parser.add_argument("--family", choices=FAMILIES, default="pick_place")
    parser.add_argument("--episodes", type=at_least(1), default=10, help="planner episodes replayed for the step rates")
    parser.add_argument("--verify", type=at_least(1), default=20, help="scenes verified for the verify rate")


# --- argument types of the `coda bench` targets: a bad number fails at parse time, naming the flag and the valid
# values, not as a traceback after minutes of benchmarking. The targets live in the libraries, below `coda`, so
# they share these instead of `coda.options`; this module imports nothing heavy at the top for them.

def at_least(low: int) -> Callable[[str], int]:
    """argparse type: an integer >= low."""

    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if n < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {n}")
        return n

    return parse


def int_list(low: int) -> Callable[[str], list[int]]:
    """argparse type: comma-separated integers, each >= low (at least one)."""
    one = at_least(low)

    def parse(text: str) -> list[int]:
        values = [one(part.strip()) for part in text.split(",") if part.strip()]
        if not values:
            raise argparse.ArgumentTypeError(f"expected comma-separated integers >= {low}, got {text!r}")
        return values

    return parse


def names_list(valid: Sequence[str], what: str) -> Callable[[str], list[str]]:
    """argparse type: comma-separated names, each one of `valid` (at least one)."""

    def parse(text: str) -> list[str]:
        names = [n.strip() for n in text.split(",") if n.strip()]
        unknown = [n for n in names if n not in valid]
        if not names or unknown:
            raise argparse.ArgumentTypeError(f"unknown {what} {', '.join(unknown) or '(none)'}; valid {what}: "
                                             f"{', '.join(valid)}")
        return names

    return parse


families_list = names_list(FAMILIES, "families")
"""argparse type: comma-separated scene families (at least one)"""


def run(args) -> dict:
    import mujoco

    from sim.compile import compile_scene
    from sim.env import CodaEnv
    from sim.families import sample_spec
    from sim.planner import run_planner
    from sim.verify import verify_spec

    specs = [sample_spec(args.family, s) for s in range(args.episodes)]
    t0 = time.perf_counter()
    for spec in specs:
        compile_scene(spec)
    compile_ms = (time.perf_counter() - t0) / len(specs) * 1000

    env_steps = env_time = raw_steps = raw_time = 0.0
    for spec in specs:
        env = CodaEnv(spec)
        actions = run_planner(env).action_array()
        # env: replay the same actions through reset/step (observation + predicate included)
        env.reset()
        start = env.get_state()
        controls = []
        t = time.perf_counter()
        for a in actions:
            env.step(a)
            controls.append((env.data.mocap_pos.copy(), env.data.mocap_quat.copy(), env.data.ctrl.copy()))
        env_time += time.perf_counter() - t
        env_steps += len(actions)
        # raw: same start state, same mocap/ctrl sequence, bare mj_step in C
        env.set_state(start)
        m, d = env.model, env.data
        t = time.perf_counter()
        for pos, quat, ctrl in controls:
            d.mocap_pos[:] = pos
            d.mocap_quat[:] = quat
            d.ctrl[:] = ctrl
            mujoco.mj_step(m, d, nstep=SUBSTEPS)
        raw_time += time.perf_counter() - t
        raw_steps += len(controls) * SUBSTEPS

    vspecs = [sample_spec(args.family, 10_000 + s) for s in range(args.verify)]
    t = time.perf_counter()
    passed = sum(verify_spec(s).passed for s in vspecs)
    verify_s = time.perf_counter() - t
    raw_rate = raw_steps / raw_time
    env_rate = env_steps / env_time
    return {
        "family": args.family,
        "raw_mj_steps_per_s": round(raw_rate),
        "raw_control_steps_per_s": round(raw_rate / SUBSTEPS, 1),
        "env_control_steps_per_s": round(env_rate, 1),
        "env_vs_raw_ratio": round(env_rate * SUBSTEPS / raw_rate, 3),
        "compile_ms": round(compile_ms, 3),
        "verified_scenes_per_s": round(len(vspecs) / verify_s, 2),
        "verify_pass_rate": passed / len(vspecs),
    }
