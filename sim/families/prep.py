"""prep: multi-object, longer-horizon kitchen preparation.

**Task description**: put several food items on a cutting board or plate, or into a pot or bowl, one after
the other.

**Randomizations**: item categories and instances (2 items; 3 in a held-out template), receptacle category and
instance (with room for all items side by side, fingers included), 0–1 distractors, seed layout.

**Success conditions**: `on(i, r)` or `inside(i, r)` for every item, and no item grasped; held-out templates use
three items, or two receptacles.
"""

from __future__ import annotations

from functools import reduce
from operator import and_

from sim import assets
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
from sim.predicates import grasped, inside, on
from sim.scene import Scene, SceneSplit
from sim.slots import line_room, line_width, slot_line

NAME = "prep"


def _all(rel, items, r):
    return reduce(and_, [rel(i, r) for i in items] + [~grasped(i) for i in items])


def _container(objs) -> bool:
    return assets.get_category(objs["r"].category).container


def _names(items) -> str:
    words = [f"the {label(i)}" for i in items]
    return ", ".join(words[:-1]) + f" and {words[-1]}"


TEMPLATES = {
    t.id: t
    for t in [
        Template("pr_on2", "train", ("a", "b", "r"),
                 lambda a, b, r: (f"put {_names([a, b])} on the {label(r)}", _all(on, [a, b], r), {}),
                 lambda objs: not _container(objs) and "c" not in objs),
        Template("pr_in2", "train", ("a", "b", "r"),
                 lambda a, b, r: (f"put {_names([a, b])} in the {label(r)}", _all(inside, [a, b], r), {}),
                 lambda objs: _container(objs) and "c" not in objs),
        Template("pr_in3", "heldout", ("a", "b", "c", "r"),
                 lambda a, b, c, r: (f"put {_names([a, b, c])} in the {label(r)}", _all(inside, [a, b, c], r), {}),
                 _container),
        Template("pr_on3", "heldout", ("a", "b", "c", "r"),
                 lambda a, b, c, r: (f"put {_names([a, b, c])} on the {label(r)}", _all(on, [a, b, c], r), {}),
                 lambda objs: not _container(objs)),
    ]
}


CONTAINER = {"container": True}
SURFACE = {"surface": True, "graspable": False}


def _item(asset) -> bool:
    return max(asset.half_extent[:2]) <= 0.04


def _roomy(items):
    """Receptacles whose slot line (see `sim.slots.slot_line`) has room for the items side by side."""
    need = line_room([line_width(a.half_extent) for a in items])

    def accept(asset) -> bool:
        cavity = asset.interior is not None
        half = asset.interior.half if cavity else asset.half_extent
        return slot_line(half[:2], cavity)[1] >= need and min(half[:2]) >= 0.045

    return accept


def sample(seed: int, split: SceneSplit | None = None, attempt: int = 0) -> Scene:
    split = split or SceneSplit()
    scene = new_scene(NAME, seed, split, attempt)
    rng = scene.rng
    n = 3 if split.tasks == "heldout" else 2
    container = bool(rng.random() < 0.5)
    objs, items = {}, []
    for slot in "abc"[:n]:
        taken = tuple(a.category for a in items)
        cat = category(rng, split, graspable=True, tag="food", exclude=taken, accept=_item)
        items.append(assets.get_asset(instance(rng, cat, split, accept=_item)))
        objs[slot] = scene.add_object(items[-1].id, role="target")
    roomy = _roomy(items)
    kinds = [CONTAINER, SURFACE] if container else [SURFACE, CONTAINER]
    r_cats = (category(rng, split, articulated=False, accept=roomy, strict=True, **kind) for kind in kinds)
    r_cat = next((c for c in r_cats if c), None) or category(rng, split, articulated=False, **kinds[0])
    objs["r"] = scene.add_object(instance(rng, r_cat, split, accept=roomy), role="receptacle")
    used = [o.category for o in objs.values()]
    add_distractors(scene, rng, split, int(rng.integers(0, 2)), exclude=tuple(used))
    choose(rng, templates_for(TEMPLATES, split, objs)).apply(scene, objs)
    scene.set_layout(seed_layout=seed_layout(rng, split))
    return scene


def roles(spec) -> dict:
    targets = [o.name for o in spec.task.with_role("target")]
    out = dict(zip("abc", targets, strict=False))
    out["r"] = spec.task.with_role("receptacle")[0].name
    return out
