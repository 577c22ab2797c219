"""Prompt files: loaded by name, placeholders filled, missing prompts and values rejected with a clear error."""

from __future__ import annotations

import pytest

from agent.roles.compiler import potential_reference, symbol_table
from agent.roles.engine import sdk_reference
from prompts import PromptError, load_prompt, render_prompt


def test_every_role_prompt_renders(hub):
    engine = render_prompt("engine", **sdk_reference(hub))
    critic = render_prompt("critic", factors="task, spatial", phases="approach, grasp")
    compiler = render_prompt("compiler", **potential_reference(hub))
    for text in (engine, critic, compiler):
        assert "{{" not in text
    assert "mug" in engine and "put the mug in the bowl" in engine and "cutting_board" in engine
    assert "h.open_fraction(" in compiler and "awr_shaped" in compiler and "return_to_engine" in compiler


def test_the_compilers_prompt_material_from_the_sim_server_is_the_in_process_one(hub):
    """The helper reference and the goals in execution order, formerly computed in the agent, as the sim server
    gives them: the same text."""
    import inspect

    from agent.roles.engine import sim_call
    from sim import program_helpers
    from sim.families import sample_spec
    from sim.planner import order_subgoals
    from sim.potential import LEARNING_TOOLS, helper_names

    lines = []
    for name in sorted(helper_names()):
        fn = getattr(program_helpers, name)
        doc = (inspect.getdoc(fn) or "").splitlines()
        lines.append(f"- h.{name}{inspect.signature(fn)}" + (f": {doc[0]}" if doc else ""))
    assert potential_reference(hub) == {"helpers": "\n".join(lines), "tools": ", ".join(LEARNING_TOOLS)}
    for family in ("pick_place", "stack", "articulated", "prep"):
        for seed in range(3):
            spec = sample_spec(family, seed)
            goals = sim_call(hub, "sim", "scene_goals", spec=spec.model_dump(mode="json"))
            assert goals == [str(a) for a in order_subgoals(spec.task.success)] and goals
            assert f"goals in execution order: {', '.join(goals)}\n" in symbol_table(spec, goals)


def test_missing_prompt_and_placeholders_are_rejected():
    with pytest.raises(PromptError, match="no prompt named 'enginee'; available prompts: compiler, critic, engine"):
        load_prompt("enginee")
    with pytest.raises(PromptError, match=r"needs value\(s\) for \['phases'\]"):
        render_prompt("critic", factors="task")
    with pytest.raises(PromptError, match=r"has no placeholder\(s\) \['colour'\]"):
        render_prompt("critic", factors="task", phases="lift", colour="red")
