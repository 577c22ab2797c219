"""`resample(spec, factor, rng)`: redraw one scene factor (task, layout or attributes), keep the other two."""

from __future__ import annotations

import math

import numpy as np

from sim import assets, layout
from sim.assets.types import ArticulatedAsset
from sim.constants import FACTORS
from sim.families import get_family
from sim.scene import ObjectHandle, PlaceRequest
from sim.spec import AttributeSpec, LayoutSpec, SceneSpec, TaskObject, TaskSpec


def resample(spec: SceneSpec, factor: str, rng: np.random.Generator, split: str = "train") -> SceneSpec:
    """A new spec equal to `spec` except for `factor`, redrawn with `rng` from the `split` side: "train",
    "heldout", or "seed" — the narrow seed distribution a base policy is trained on (`sim.assets.SEED_*`: the seed
    layouts, the first train instances of each category, the train task templates)."""
    if factor not in FACTORS:
        raise ValueError(f"unknown factor {factor!r}; valid factors: {', '.join(FACTORS)}")
    if split not in ("train", "heldout", "seed"):
        raise ValueError(f"split must be 'train', 'heldout' or 'seed', got {split!r}")
    meta = {**spec.meta, "parent": spec.spec_hash(), "varied": factor}
    if factor == "task":
        return spec.model_copy(update={"task": _task(spec, rng, "train" if split == "seed" else split), "meta": meta})
    if factor == "layout":
        return spec.model_copy(update={"layout": _layout(spec, rng, split), "meta": meta})
    return spec.model_copy(update={"attributes": _attributes(spec, rng, seed_side=split == "seed"), "meta": meta})


def with_template(spec: SceneSpec, template: str) -> SceneSpec:
    """`spec` with its task rebuilt from the family's template `template` over the scene's own role binding (the
    same objects and roles; a template of either split). ValueError naming the family's templates when it has no
    such template, or when the scene's objects do not fit it."""
    fam = get_family(spec.family)
    if template not in fam.TEMPLATES:
        raise ValueError(f"unknown {spec.family} template {template!r}; valid: {', '.join(fam.TEMPLATES)}")
    t = fam.TEMPLATES[template]
    objects = {o.name: o for o in spec.task.objects}
    handles = {s: ObjectHandle(n, objects[n].category, objects[n].role) for s, n in fam.roles(spec).items()}
    if not all(s in handles for s in t.slots) or not t.requires(handles):
        raise ValueError(f"the objects of this {spec.family} scene do not fit template {template!r}")
    instruction, success, initial = t.build(**{k: handles[k] for k in t.slots})
    task = spec.task.model_copy(update={"instruction": instruction, "template": t.id, "success": success,
                                        "initial_state": initial})
    return spec.model_copy(update={"task": TaskSpec.model_validate(task.model_dump())})


def _task(spec: SceneSpec, rng, split: str) -> TaskSpec:
    fam = get_family(spec.family)
    base = fam.roles(spec)
    objects = {o.name: o for o in spec.task.objects}
    bindings = [base]
    # alternative bindings: another graspable distractor takes the target's place
    for slot in [s for s in base if objects[base[s]].role == "target"]:
        for o in spec.task.with_role("distractor"):
            if assets.get_category(o.category).graspable:
                bindings.append({**base, slot: o.name})
    options = []
    for binding in bindings:
        handles = {s: ObjectHandle(n, objects[n].category, objects[n].role) for s, n in binding.items()}
        for t in fam.TEMPLATES.values():
            if t.split == split and all(s in handles for s in t.slots) and t.requires(handles):
                if not (binding == base and t.id == spec.task.template):
                    options.append((t, binding, handles))
    if not options:
        raise ValueError(f"no other task fits the objects of this {spec.family} scene")
    template, binding, handles = options[int(rng.integers(len(options)))]
    instruction, success, initial = template.build(**{k: handles[k] for k in template.slots})
    slot_role = {s: objects[n].role for s, n in base.items()}
    new_roles = {n: ("distractor" if o.role == "target" else o.role) for n, o in objects.items()}
    for s, n in binding.items():
        new_roles[n] = slot_role[s]
    return TaskSpec(
        family=spec.family,
        instruction=instruction,
        template=template.id,
        objects=tuple(TaskObject(name=o.name, category=o.category, role=new_roles[o.name]) for o in spec.task.objects),
        success=success,
        initial_state=initial,
    )


def _layout(spec: SceneSpec, rng, split: str) -> LayoutSpec:
    ids = [lay.id for lay in assets.layouts_on(split)]
    seed_layout = int(ids[int(rng.integers(len(ids)))])
    requests = []
    for p in spec.layout.placements:
        if p.support != "table":
            requests.append(PlaceRequest(object=p.object, on=p.support))
        elif p.relation and "near" in p.relation:
            requests.append(PlaceRequest(object=p.object, near=p.relation["near"], gap=p.relation.get("gap", 0.05)))
        else:
            requests.append(None)
    placements = layout.resolve(list(spec.task.objects), spec.attributes, requests, seed_layout=seed_layout, rng=rng)
    return LayoutSpec(seed_layout=seed_layout, placements=tuple(placements))


def _attributes(spec: SceneSpec, rng, seed_side: bool = False) -> AttributeSpec:
    """Every object's instance, mass and friction redrawn (its category kept): from the instances of its own side,
    or (`seed_side`) from its category's seed instances where it is a train object."""
    out = []
    places = {p.object: p for p in spec.layout.placements}
    for a in spec.attributes.objects:
        current = assets.get_asset(a.asset)
        side = "seed" if seed_side and current.split == "train" else current.split
        pool = [x for x in assets.assets_in(current.category, split=side) if x.id != a.asset or side == "seed"]
        pool = pool or [current]
        if not isinstance(current, ArticulatedAsset) and places[a.object].support == "table":
            room = _room(spec, a.object, places)
            fits = [x for x in pool if layout.footprint_radius(x, a.scale) <= room]
            pool = fits or [current]
        new = pool[int(rng.integers(len(pool)))]
        cat = assets.get_category(current.category)
        mass = float(rng.uniform(*cat.mass_range)) if not isinstance(new, ArticulatedAsset) else None
        friction = float(rng.uniform(*cat.friction_range))
        out.append(a.model_copy(update={"asset": new.id, "mass": mass, "friction": friction, "rgba": None}))
    return AttributeSpec(objects=tuple(out))


def _room(spec: SceneSpec, name: str, places) -> float:
    """Largest footprint radius `name` can take without touching its table neighbours."""
    me = places[name]
    room = math.inf
    for a in spec.attributes.objects:
        p = places[a.object]
        if a.object == name or p.support != "table":
            continue
        other = assets.get_asset(a.asset)
        if isinstance(other, ArticulatedAsset):
            hx, hy = other.half_extent[0] * a.scale, other.half_extent[1] * a.scale
            dx = max(p.x - hx - me.x, 0.0, me.x - p.x - hx)
            dy = max(p.y - hy - me.y, 0.0, me.y - p.y - hy)
            gap = math.hypot(dx, dy)
        else:
            gap = math.hypot(p.x - me.x, p.y - me.y) - layout.footprint_radius(other, a.scale)
        room = min(room, gap - 0.005)
    return room
