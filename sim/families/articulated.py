"""articulated: open or close a drawer, door, lid or sliding door; put an object into an open drawer.

**Task description**: the gripper grasps the fixture's handle and moves it along the joint (slide or hinge), or
puts a graspable object into an opened drawer.

**Randomizations**: fixture kind and instance (size, joint range, damping), its slot at the back of the table,
initial opening, 0–2 distractors, the object to store.

**Success conditions**: `open_fraction(f, min=0.6)` to open, `open_fraction(f, max=0.1)` to close,
`inside(t, f) & ~grasped(t)` to store; held-out templates ask for half-opening, and for closing doors and lids.
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
from sim.predicates import grasped, inside, open_fraction
from sim.scene import Scene, SceneSplit, place

NAME = "articulated"
OPEN_MIN = 0.6
CLOSED_MAX = 0.1


def _kind(*kinds):
    return lambda objs: objs["f"].category in kinds


WORD = {"drawer": "drawer", "door": "cabinet door", "lid": "lid of the box", "sliding": "sliding door"}


def _w(f) -> str:
    return WORD.get(f.category, label(f))


TEMPLATES = {
    t.id: t
    for t in [
        Template("ar_open", "train", ("f",),
                 lambda f: (f"open the {_w(f)}", open_fraction(f, min=OPEN_MIN), {})),
        Template("ar_close", "train", ("f",),
                 lambda f: (f"close the {_w(f)}", open_fraction(f, max=CLOSED_MAX), {f.name: {"open": 0.9}}),
                 _kind("drawer", "sliding")),
        Template("ar_store", "train", ("t", "f"),
                 lambda t, f: (f"put the {label(t)} in the drawer", inside(t, f) & ~grasped(t), {f.name: {"open": 1.0}}),
                 _kind("drawer")),
        Template("ar_half", "heldout", ("f",),
                 lambda f: (f"open the {_w(f)} halfway", open_fraction(f, min=0.35, max=0.7), {}),
                 _kind("drawer", "sliding")),
        Template("ar_shut", "heldout", ("f",),
                 lambda f: (f"shut the {_w(f)}", open_fraction(f, max=CLOSED_MAX), {f.name: {"open": 0.7}}),
                 _kind("door", "lid")),
    ]
}


def _small(asset) -> bool:
    return max(asset.half_extent[:2]) <= 0.045 and asset.half_extent[2] <= 0.06


def sample(seed: int, split: SceneSplit | None = None, attempt: int = 0) -> Scene:
    split = split or SceneSplit()
    scene = new_scene(NAME, seed, split, attempt)
    rng = scene.rng
    store = split.tasks == "train" and rng.random() < 0.3
    kind = "drawer" if store else choose(rng, ["drawer", "door", "lid", "sliding"])
    f = scene.add_object(instance(rng, kind, split), role="articulated")
    objs = {"f": f}
    if store:
        cat = category(rng, split, graspable=True, tag="food", accept=_small)
        objs["t"] = scene.add_object(instance(rng, cat, split, accept=_small), role="target")
    candidates = [t for t in templates_for(TEMPLATES, split, objs) if ("t" in t.slots) == store]
    template = choose(rng, candidates)
    n_distractors = int(rng.integers(0, 3))
    if split.categories == "heldout":  # the fixture kinds are shared, so unseen categories come as loose objects
        n_distractors = max(n_distractors, 1)
    add_distractors(scene, rng, split, n_distractors, exclude=(kind,))
    template.apply(scene, objs)
    scene.set_layout(place(f), seed_layout=seed_layout(rng, split))
    return scene


def roles(spec) -> dict:
    out = {"f": spec.task.with_role("articulated")[0].name}
    targets = spec.task.with_role("target")
    if targets:
        out["t"] = targets[0].name
    return out
