"""Scene and fault operators of the data engine, over scene specs and envs (no agent, no MCP).

    variations            one-factor variation operators on specs (`OPERATORS[factor][name]`), role defaults
    perturb               execution faults planted into planner rollouts (`sim.trace.RecordingEnv` perturbations)
    planted               planted failures with known (factor, phase): the labelled critic benchmark's rollouts
    potential_templates   phase and cause templates of the offline Text2potential compiler

The sim server exposes them as tools; the agent's roles reach them only through it.
"""
