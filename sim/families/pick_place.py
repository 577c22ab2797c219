"""pick_place: put an object in or on a receptacle.

**Task description**: the gripper picks a graspable target and puts it in a container (bowl, pot, basket...) or
on a surface (plate, board, tray...), then lets go.

**Randomizations**: target and receptacle categories and instances, 0–2 graspable distractors, seed layout slots
and yaw, the receptacle's distance to the target.

**Success conditions**: `inside(t, r) & ~grasped(t)` (containers) or `on(t, r) & ~grasped(t)` (surfaces);
held-out task templates use `near`, `upright` and `lifted` compositions.
"""

from __future__ import annotations

from sim.families.base import (
    Template,
    add_distractors,
    category,
    choose,
    instance,
    label,
    new_scene,
    seed_layout,
    templates_for,
)
from sim.predicates import grasped, inside, lifted, near, on, upright
from sim.scene import Scene, SceneSplit, place

NAME = "pick_place"


def _container(objs) -> bool:
    from sim import assets

    return assets.get_category(objs["r"].category).container


TEMPLATES = {
    t.id: t
    for t in [
        Template("pp_in", "train", ("t", "r"),
                 lambda t, r: (f"put the {label(t)} in the {label(r)}", inside(t, r) & ~grasped(t), {}),
                 _container),
        Template("pp_into", "train", ("t", "r"),
                 lambda t, r: (f"move the {label(t)} into the {label(r)}", inside(t, r) & ~grasped(t), {}),
                 _container),
        Template("pp_on", "train", ("t", "r"),
                 lambda t, r: (f"place the {label(t)} on the {label(r)}", on(t, r) & ~grasped(t), {}),
                 lambda objs: not _container(objs)),
        Template("pp_on_top", "train", ("t", "r"),
                 lambda t, r: (f"put the {label(t)} on top of the {label(r)}", on(t, r) & ~grasped(t), {}),
                 lambda objs: not _container(objs)),
        Template("pp_near", "heldout", ("t", "r"),
                 lambda t, r: (f"put the {label(t)} next to the {label(r)}", near(t, r, dist=0.22) & ~grasped(t)
                               & ~inside(t, r) & upright(t), {})),
        Template("pp_upright", "heldout", ("t", "r"),
                 lambda t, r: (f"put the {label(t)} in the {label(r)} and keep it standing",
                               inside(t, r) & upright(t, tol_deg=15) & ~grasped(t), {}),
                 _container),
        Template("pp_lift", "heldout", ("t",),
                 lambda t: (f"pick up the {label(t)} and hold it in the air", lifted(t, 0.08) & grasped(t), {})),
    ]
}


def sample(seed: int, split: SceneSplit | None = None, attempt: int = 0) -> Scene:
    split = split or SceneSplit()
    scene = new_scene(NAME, seed, split, attempt)
    rng = scene.rng
    container = bool(rng.random() < 0.6)
    r_cat = (
        category(rng, split, container=True, articulated=False)
        if container
        else category(rng, split, surface=True, graspable=False, articulated=False)
    )
    t_cat = category(rng, split, graspable=True, exclude=(r_cat,))
    t = scene.add_object(instance(rng, t_cat, split), role="target")
    r = scene.add_object(instance(rng, r_cat, split), role="receptacle")
    add_distractors(scene, rng, split, int(rng.integers(0, 3)), exclude=(t_cat, r_cat))
    objs = {"t": t, "r": r}
    choose(rng, templates_for(TEMPLATES, split, objs)).apply(scene, objs)
    scene.set_layout(place(r, near=t, gap=float(rng.uniform(0.04, 0.12))), seed_layout=seed_layout(rng, split))
    return scene


def roles(spec) -> dict:
    """Template slots bound to the spec's objects (used to resample the task)."""
    return {"t": spec.task.with_role("target")[0].name, "r": spec.task.with_role("receptacle")[0].name}
