"""A compiler checker over local traces (tests only): the checks the verifier server's `check_potential` runs, on
`sim.trace.Trace`s held in the test process instead of stored ones."""

from __future__ import annotations

from sim.potential import PotentialReport, check_program, episode


def local_checker(spec, rollouts=(), demos=(), every: int = 1):
    """`CompileRequest.checker` checking Φ on the states of `rollouts` (every `every`-th) and of the successful
    `demos` (Φ must rise along them)."""
    rollout_eps = [episode(t, every) for t in rollouts]
    demo_eps = [episode(t) for t in demos if t.success]
    if not demo_eps:
        raise ValueError("the compiler needs at least one successful demonstration of the scene to check Φ")

    def check(source: str) -> PotentialReport:
        return check_program(source, spec, rollout_eps, demo_eps)

    return check
