"""External benchmarks (robosuite, Meta-World): a policy trained here, evaluated on a suite nobody here wrote.

    from policy.external import make_adapter, parse_external
    for benchmark, task in parse_external("robosuite:Lift,Door+metaworld:pick-place-v3"):
        with make_adapter(benchmark, task) as env:
            obs = env.reset(seed=0)
            obs, reward, terminated, truncated, info = env.step_chunk(chunk)   # chunk: (8, 7), this project's actions

The external simulator runs unmodified in its own virtualenv (`scripts/setup --external`), in a worker
subprocess; this package holds the adapters (`robosuite_tasks`, `metaworld_tasks`), their workers, the worker
protocol and the action mapping. It imports neither torch nor the MCP servers; `policy.external.evaluate` runs a
policy on the adapters.
"""

from __future__ import annotations

BENCHMARKS = ("robosuite", "metaworld")


def benchmark_tasks(benchmark: str) -> tuple[str, ...]:
    if benchmark == "robosuite":
        from policy.external.robosuite_tasks import task_names

        return task_names()
    if benchmark == "metaworld":
        from policy.external.metaworld_tasks import task_names

        return task_names()
    raise ValueError(f"unknown external benchmark {benchmark!r}; valid benchmarks: {', '.join(BENCHMARKS)}")


def parse_external(text: str) -> list[tuple[str, str]]:
    """'robosuite:Lift,Stack' (several benchmarks joined by '+' or given again) -> [(benchmark, task), ...];
    ValueError naming the valid benchmarks or tasks."""
    out: list[tuple[str, str]] = []
    for part in [p for p in text.replace("+", " ").split() if p]:
        benchmark, sep, tasks = part.partition(":")
        if not sep or not tasks.strip(","):
            raise ValueError(f"--external {part!r}: give BENCHMARK:TASK[,TASK...], e.g. robosuite:Lift,Door "
                             f"(benchmarks: {', '.join(BENCHMARKS)})")
        valid = benchmark_tasks(benchmark)
        for task in [t for t in tasks.split(",") if t]:
            if task not in valid:
                raise ValueError(f"unknown {benchmark} task {task!r}; valid tasks: {', '.join(valid)}")
            if (benchmark, task) not in out:
                out.append((benchmark, task))
    if not out:
        raise ValueError("--external: no tasks given; e.g. robosuite:Lift,Door")
    return out


def make_adapter(benchmark: str, task: str, **kwargs):
    """The adapter of one external task (starts its worker process)."""
    if benchmark == "robosuite":
        from policy.external.robosuite_tasks import RobosuiteAdapter

        return RobosuiteAdapter(task, **kwargs)
    if benchmark == "metaworld":
        from policy.external.metaworld_tasks import MetaWorldAdapter

        return MetaWorldAdapter(task, **kwargs)
    raise ValueError(f"unknown external benchmark {benchmark!r}; valid benchmarks: {', '.join(BENCHMARKS)}")
