"""Sandbox overhead: verified scenes per second through the warm sandbox pool vs unsandboxed in-process execution.

Both paths verify the same scene programs (the seed scenes of every family, written as programs by
`sim.scene.to_program`) with the same checks, one program after the other from one caller thread:

- sandboxed: `sim.verify.verify_program(source, seed, pool=pool)` with a pool of one zygote: static check, a
  fresh locked-down child of the zygote (namespaces, empty root, seccomp, rlimits, audit hook, restricted
  builtins) runs the program and its finalizer, JSON back, then `verify_spec` in the caller;
- unsandboxed: `exec` of the compiled program in this process, `sim.scene.finalize_program`, then `verify_spec`.

Each round runs every program through one path as a stream (what the data engine or a verifier server does),
then through the other; the order alternates from round to round (ABBA) so that load on a shared machine hits
both alike, with a short untimed pause between the blocks. The spec hash of every program must agree between
the paths. Also reported: the execution step alone (a sandboxed run vs in-process exec + finalize, again as
streams), and CPU time per scene of each path — the caller's, plus the zygote's and its children's for the
sandboxed path — because the sandbox keeps part of its work (forking, locking down and warming up the next
child, tearing down the last one) off the caller's critical path, on another core when one is free.
"""

from __future__ import annotations

import os
import time

from sim.bench import at_least


def add_arguments(parser) -> None:
    parser.add_argument("--programs", type=at_least(1), default=20,
                        help="scene programs (seed scenes, families in turn)")
    parser.add_argument("--rounds", type=at_least(1), default=4, help="passes over the programs per path (ABBA order)")
    parser.add_argument("--no-warmup", action="store_true",
                        help="standby children skip the trusted warm-up scene (to measure what it saves)")


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


def _cpu_s(zygote_pid: int | None) -> float:
    """CPU seconds of this process, plus the zygote's and its reaped children's."""
    total = time.process_time()
    if zygote_pid is not None:
        try:
            with open(f"/proc/{zygote_pid}/stat") as fh:
                fields = fh.read().rpartition(")")[2].split()
            total += sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime stime cutime cstime
        except (OSError, ValueError):
            pass
    return total


def run(args) -> dict:
    from sim.sandbox import SandboxPool
    from sim.verify import verify_program, verify_programs, verify_spec

    programs = _programs(args.programs)
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    pool = SandboxPool(size=1, **({"warmup": None} if args.no_warmup else {}))
    info = pool.worker_info()  # waits for the zygote: imports numpy, MuJoCo and the SDK once
    start_s = time.perf_counter() - t0
    zygote = info.get("host_pid", info.get("pid"))  # inside its PID namespace the zygote is pid 1

    def sandboxed(source: str, seed: int):
        return verify_program(source, seed, pool=pool)

    def unsandboxed(source: str, seed: int):
        return verify_spec(_exec_unsandboxed(source, seed))

    def sandbox_exec(source: str, seed: int):
        result = pool.run(source, finalizer="sim.scene:finalize_program", inputs={"globals": {"seed": seed}})
        assert result.ok, result.error
        return result

    def each(fn):
        return lambda progs: [fn(source, seed) for source, seed in progs]

    # streams of programs; "pipelined": the sandbox runs the next program while this thread verifies the last spec
    paths = {"sandboxed": each(sandboxed), "pipelined": lambda progs: list(verify_programs(progs, pool=pool)),
             "unsandboxed": each(unsandboxed), "sandbox_exec": each(sandbox_exec),
             "inprocess_exec": each(_exec_unsandboxed)}
    wall = dict.fromkeys(paths, 0.0)
    cpu = dict.fromkeys(paths, 0.0)
    passed = {"sandboxed": 0, "pipelined": 0, "unsandboxed": 0}
    hashes: dict[str, list] = {k: [] for k in passed}
    try:
        for source, seed in programs[:4]:  # warm both paths (asset caches, lazy imports, the standby child)
            sandboxed(source, seed)
            unsandboxed(source, seed)
        for r in range(args.rounds):
            for group in (("sandboxed", "pipelined", "unsandboxed"), ("sandbox_exec", "inprocess_exec")):
                for name in group if r % 2 == 0 else group[::-1]:
                    time.sleep(0.05)  # untimed: the last block's background work settles
                    c, t = _cpu_s(zygote), time.perf_counter()
                    outs = paths[name](programs)
                    wall[name] += time.perf_counter() - t
                    cpu[name] += _cpu_s(zygote) - c
                    if name in passed:
                        passed[name] += sum(o.passed for o in outs)
                        hashes[name] += [o.spec_hash for o in outs]
    finally:
        pool.close()
    n = len(programs) * args.rounds
    boxed_rate, plain_rate = n / wall["sandboxed"], n / wall["unsandboxed"]
    ms = {k: round(v / n * 1000, 2) for k, v in wall.items()}
    cpu_ms = {k: round(v / n * 1000, 2) for k, v in cpu.items()}
    return {
        "programs": len(programs),
        "verified": n,
        "passed": passed,
        "spec_mismatches": sum(a != b or b != c for a, b, c in zip(hashes["sandboxed"], hashes["pipelined"],
                                                                  hashes["unsandboxed"], strict=True)),
        "load_average_1min": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],  # before, after
        "warmup": pool.warmup,
        "pool_start_s": round(start_s, 2),
        "zygote_baseline_mb": info.get("baseline_mb"),
        "isolation": info.get("isolation"),
        "sandboxed_scenes_per_s": round(boxed_rate, 1),
        "unsandboxed_scenes_per_s": round(plain_rate, 1),
        "sandboxed_over_unsandboxed": round(boxed_rate / plain_rate, 3),
        "pipelined_scenes_per_s": round(n / wall["pipelined"], 1),
        "pipelined_over_unsandboxed": round(n / wall["pipelined"] / plain_rate, 3),
        "sandboxed_ms": ms["sandboxed"],
        "unsandboxed_ms": ms["unsandboxed"],
        "overhead_ms_per_scene": round(ms["sandboxed"] - ms["unsandboxed"], 2),
        "sandbox_exec_ms": ms["sandbox_exec"],
        "inprocess_exec_ms": ms["inprocess_exec"],
        "sandboxed_cpu_ms": cpu_ms["sandboxed"],
        "unsandboxed_cpu_ms": cpu_ms["unsandboxed"],
        "sandbox_exec_cpu_ms": cpu_ms["sandbox_exec"],
        "inprocess_exec_cpu_ms": cpu_ms["inprocess_exec"],
    }
