"""The scene-program SDK reference as served to agents (markdown, built from the live SDK, so it never drifts).

    sdk_reference()   # the program API, the predicate language and the vocabulary
"""

from __future__ import annotations

import functools
import inspect
import re
import textwrap


def _doc(obj, default: str = "") -> str:
    return (inspect.getdoc(obj) or default).split("\n\n")[0].replace("\n", " ")


def _sig(name: str, fn) -> str:
    sig = re.sub(r"(: |-> )'([^']*)'", r"\1\2", str(inspect.signature(fn)))  # unquote string annotations
    return f"{name}{sig.replace('(self, ', '(').replace('(self)', '()')}"


@functools.cache
def sdk_reference() -> str:
    """Markdown reference of the scene-program API, the predicate language and the vocabulary."""
    import sim.predicates as preds
    from sim import scene as scene_mod
    from sim.assets.listing import all_categories
    from sim.constants import FACTORS, FAMILIES, ROLES
    from sim.predicates import ATOM_SIGNATURES
    from sim.scene import COLORS, Scene

    lines = [
        "# CoDA scene-program SDK",
        "",
        "A scene program is Python that imports only `sim`, `math` and `numpy`, and leaves a `Scene` named `scene`.",
        "`seed` is supplied by the runner; all randomness must come from `scene.rng` (numpy Generator) so the same",
        "program and seed give the same scene. Programs run in a sandbox (no files, no network, ~10 s, 1 GB).",
        "",
        "```python",
        "from sim import Scene, place, on, inside, grasped, lifted, open_fraction, near, upright, stacked",
        "",
        textwrap.dedent((scene_mod.__doc__ or "").split("\n\n")[1]).strip("\n"),
        "```",
        "",
        "## Scene API",
        "",
        f"- `{_sig('Scene', Scene.__init__)}`: {_doc(Scene)}",
    ]
    for name in ("add_object", "set_task", "set_layout", "set_attributes", "set_start", "objects"):
        fn = getattr(Scene, name)
        lines.append(f"- `scene.{_sig(name, fn)}`: {_doc(fn, 'the object handles added so far')}")
    lines.append(f"- `{_sig('place', scene_mod.place)}`: {_doc(scene_mod.place)}")
    lines += [
        "",
        "## Success predicates",
        "",
        "Atoms over object handles (or names; 'table' is a valid support), combined with `&` (and), `|` (or) and",
        "`~` (not). Example: `inside(mug, bowl) & ~grasped(mug)`. A predicate must be false when the scene starts.",
        "",
    ]
    for op, (_, params) in ATOM_SIGNATURES.items():
        fn = getattr(preds, op)
        extra = f" (defaults: {', '.join(f'{k}={v:g}' for k, v in params.items())})" if params else ""
        lines.append(f"- `{_sig(op, fn)}`: {_doc(fn)}{extra}")
    lines += [
        "",
        "As JSON (what specs store and `check_predicate` accepts): an atom is",
        '`{"op": "inside", "args": ["mug", "bowl"], "params": {}}`; combinations are `{"op": "and", "terms": [...]}`,',
        '`{"op": "or", "terms": [...]}` and `{"op": "not", "term": {...}}`.',
        "",
        "## What the verifier checks (verify_program, coda verify)",
        "",
        "In order: the program runs, the spec is valid and compiles, sizes / masses / friction are plausible,",
        "receptacles can hold their items, nothing interpenetrates at the start, objects settle (stable) within",
        "the gripper's reach, the predicate evaluates and is false at the start; with `planner`, the planner solves it.",
        "Receptacle capacity uses bounding boxes; an item's width is its narrow side: each item must be at most as",
        "wide as the container's opening (a round container's diameter, else its long side) and, in a cabinet, as",
        "tall as its inside; several items must fit side by side across a round container, their footprints must",
        "not cover more than the opening, and on a surface their centres must fit side by side. Only terms joined",
        "by `&` count (not those under `|` or `~`); one item may stick out of a bowl or overhang a plate.",
        "",
        "## What the scripted planner does (run_planner, demonstrations)",
        "",
        "- It plans the positive atoms of the predicate: `open_fraction` first, then `on` / `inside` / `stacked` /",
        "  `near` with supports before what goes on them, then `lifted`; `grasped` and `upright` are not planned.",
        "- Negated atoms are never planned: they must come true on their own (`~grasped(x)` after the release,",
        "  `~inside(x, y)` when `x` is placed `near(y)`). Of `or` it plans the first alternative only.",
        "- It refuses, with the reason and no steps (`failure`: 'not planned: ...'; `verify --planner` reports",
        "  it as `planner_solvable`): a predicate with nothing to plan; a goal on the table (`on(x, 'table')` is",
        "  valid but has no destination: use `near(x, y)` for a spot on the table); `inside` into something",
        "  without a cavity; `grasped(x)` without `lifted(x)` (it lets go of what it places); `upright(x)` false",
        "  at the start; a negation false at the start whose objects no goal moves (e.g. `~inside(x, y)` with `x`",
        "  in `y`: the planner does not take things out).",
        "- A scene that fails verification is not planned: `run_planner` reports the verifier's reasons instead.",
        "- Instances: `add_object(category)` draws the instance from a generator seeded by the seed, the object's",
        "  name and the task (family, objects, instruction, predicate), not from `scene.rng`: the same program and",
        "  seed give the same instances, other programs and objects draw independently; `'mug/007'` chooses one.",
        "- Splits: `Scene(..., split=SceneSplit(instances=, categories=, layouts=, tasks=))`, each 'train' (default)",
        "  or 'heldout', says which side of the train / held-out split each factor draws from (held-out asset",
        "  instances and categories, layouts, task templates: what the OOD suites use). A program usually leaves",
        "  `split` unset; `sample_scene(split=...)` and the suites set it.",
        "- Robots: `Scene(..., robot='gripper' | 'panda')`: the floating parallel-jaw gripper (default) or the Franka",
        "  Panda (robosuite's model; same actions and observations). A run with a robot (`coda serve sim --robot`)",
        "  makes every scene it stores for that robot, whatever the program names.",
        "",
        "## Vocabulary",
        "",
        f"- families: {', '.join(FAMILIES)}",
        f"- roles: {', '.join(ROLES)}",
        f"- scene factors (resample one, keep the others): {', '.join(FACTORS)}",
        f"- named colours for `rgba`: {', '.join(COLORS)}",
        "- categories by kind (see the `sim://assets` resource or `list_assets` for tags, sizes and splits):",
    ]
    cats = all_categories()
    for kind in ("graspable", "container", "surface", "articulated"):
        names = [c.name + ("*" if c.split == "heldout" else "") for c in cats if getattr(c, kind)]
        lines.append(f"  - {kind}: {', '.join(names)}")
    lines.append("  (* = held-out category: used only by the OOD evaluation suite)")
    return "\n".join(lines) + "\n"
