"""Sandbox overhead: verified scenes per second through the warm sandbox pool vs unsandboxed in-process execution.

Both paths verify the same scene programs (the seed scenes of every family, written as programs by
`sim.scene.to_program`) with the same checks:

- sandboxed: `sim.verify.verify_program(source, seed, pool=pool)`: static check, fork of a warm zygote, rlimits,
  audit hook, restricted builtins, the program and its finalizer in the child, JSON back, then `verify_spec`;
- unsandboxed: `exec` of the compiled program in this process, `sim.scene.finalize_program`, then `verify_spec`.

The two are interleaved program by program (so load on a shared machine hits both alike) and repeated `--rounds`
times. Also reported: the execution step alone (sandboxed run vs in-process exec + finalize), in ms per program.
"""

from __future__ import annotations

import time


def add_arguments(parser) -> None:
    parser.add_argument("--programs", type=int, default=20, help="scene programs (seed scenes, families in turn)")
    parser.add_argument("--rounds", type=int, default=3, help="passes over the programs (interleaved)")


def _programs(n: int) -> list[tuple[str, int]]:
    from sim.constants import FAMILIES
    from sim.families import sample_spec
    from sim.scene import to_program

    out = []
    for i in range(n):
        spec = sample_spec(FAMILIES[i % len(FAMILIES)], i)
        out.append((to_program(spec), spec.seed))
    return out


def _exec_unsandboxed(source: str, seed: int) -> dict:
    from sim.scene import finalize_program

    namespace = {"__name__": "__program__", "seed": seed}
    exec(compile(source, "<program>", "exec", dont_inherit=True), namespace)  # noqa: S102 - the unsandboxed baseline
    return finalize_program(namespace, {})


def run(args) -> dict:
    from sim.sandbox import SandboxPool
    from sim.verify import verify_program, verify_spec

    programs = _programs(args.programs)
    t0 = time.perf_counter()
    pool = SandboxPool(size=1)
    info = pool.worker_info()  # waits for the zygote: imports numpy, MuJoCo and the SDK once
    start_s = time.perf_counter() - t0
    try:
        for source, seed in programs[:2]:  # warm both paths (asset caches, lazy imports)
            verify_program(source, seed, pool=pool)
            verify_spec(_exec_unsandboxed(source, seed))
        times = {"sandboxed": 0.0, "unsandboxed": 0.0, "sandbox_exec": 0.0, "inprocess_exec": 0.0}
        passed = {"sandboxed": 0, "unsandboxed": 0}
        mismatched = 0
        for _ in range(args.rounds):
            for source, seed in programs:
                t = time.perf_counter()
                boxed = verify_program(source, seed, pool=pool)
                times["sandboxed"] += time.perf_counter() - t
                t = time.perf_counter()
                plain = verify_spec(_exec_unsandboxed(source, seed))
                times["unsandboxed"] += time.perf_counter() - t
                passed["sandboxed"] += boxed.passed
                passed["unsandboxed"] += plain.passed
                mismatched += boxed.spec_hash != plain.spec_hash
                t = time.perf_counter()
                result = pool.run(source, finalizer="sim.scene:finalize_program", inputs={"globals": {"seed": seed}})
                times["sandbox_exec"] += time.perf_counter() - t
                assert result.ok, result.error
                t = time.perf_counter()
                _exec_unsandboxed(source, seed)
                times["inprocess_exec"] += time.perf_counter() - t
    finally:
        pool.close()
    n = len(programs) * args.rounds
    boxed_rate, plain_rate = n / times["sandboxed"], n / times["unsandboxed"]
    return {
        "programs": len(programs),
        "verified": n,
        "passed": passed,
        "spec_mismatches": mismatched,
        "pool_start_s": round(start_s, 2),
        "zygote_baseline_mb": info.get("baseline_mb"),
        "sandboxed_scenes_per_s": round(boxed_rate, 1),
        "unsandboxed_scenes_per_s": round(plain_rate, 1),
        "sandboxed_over_unsandboxed": round(boxed_rate / plain_rate, 3),
        "sandbox_exec_ms": round(times["sandbox_exec"] / n * 1000, 2),
        "inprocess_exec_ms": round(times["inprocess_exec"] / n * 1000, 2),
        "overhead_ms_per_scene": round((times["sandboxed"] - times["unsandboxed"]) / n * 1000, 2),
    }
