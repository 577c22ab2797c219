"""Names and defaults the command line and the agent share, in a module light enough for argument parsing."""

import os

ROLE_BACKENDS = ("offline", "anthropic", "openai")
"""who plays the engine, critic and compiler roles (offline needs no network or key)"""

RUN_MODES = ("orchestrated", "autonomous")
"""orchestrated: the loop calls the tools; autonomous: an LLM runs the rounds through the tools"""


def default_workers() -> int:
    """Simulation workers of the trainer server in the long jobs (`coda run`, an experiment's cells): two where this
    process may use two CPUs, else one. Episodes are the same whatever the number of workers (`sim.workers`); on
    the 2-core machine two made the quick run 1.15x faster, its evaluations 1.54x (docs/BENCHMARKS.md)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    return 2 if cpus >= 2 else 1
