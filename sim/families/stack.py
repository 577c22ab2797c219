"""stack: stack one block on another (or build a three-block tower).

**Task description**: the gripper picks a block-like object and stacks it, centred and upright, on another.

**Randomizations**: block categories and instances (an arched block only on a support its feet can stand on),
0–2 distractors, seed layout slots and yaw.

**Success conditions**: `stacked(t, b) & ~grasped(t)`; the held-out tower template needs
`stacked(t, m) & stacked(m, b) & ~grasped(t)`.
"""

from __future__ import annotations

from sim import assets
from sim.assets.catalog import part_bounds
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
from sim.predicates import grasped, stacked
from sim.scene import Scene, SceneSplit

NAME = "stack"


FLAT_TOPPED_EXCLUDE = ("pyramid_block",)
"""block-tagged categories that cannot carry another block"""


def _blockish(asset) -> bool:
    hx, hy, hz = asset.half_extent
    return min(hx, hy) >= 0.018 and hz <= 0.04


def _underside_gap(asset) -> float:
    """Widest gap between the feet of an asset along its x axis (the arch of a bridge block); 0 if none."""
    feet = sorted((lo[0], hi[0]) for lo, hi in map(part_bounds, asset.parts) if lo[2] < 0.002)
    gap, reach = 0.0, feet[0][1]
    for lo, hi in feet[1:]:
        gap, reach = max(gap, lo - reach), max(reach, hi)
    return gap


def _fits_on(support):
    """Accepts blocks that rest on `support` on their feet: an arch must not straddle it (its feet need at
    least half their length on the support's long side)."""
    room = 2 * max(support.half_extent[:2])

    def accept(top) -> bool:
        gap = _underside_gap(top)
        return _blockish(top) and (gap == 0.0 or room >= gap + (2 * top.half_extent[0] - gap) / 2)

    return accept


TEMPLATES = {
    t.id: t
    for t in [
        Template("st_on", "train", ("t", "b"),
                 lambda t, b: (f"stack the {label(t)} on the {label(b)}", stacked(t, b) & ~grasped(t), {})),
        Template("st_top", "train", ("t", "b"),
                 lambda t, b: (f"put the {label(t)} on top of the {label(b)}", stacked(t, b) & ~grasped(t), {})),
        Template("st_under", "heldout", ("t", "b"),
                 lambda t, b: (f"place the {label(b)} under the {label(t)} by stacking the {label(t)} onto it",
                               stacked(t, b) & ~grasped(t), {})),
        Template("st_tower", "heldout", ("t", "m", "b"),
                 lambda t, m, b: (f"build a tower: the {label(b)} at the bottom, then the {label(m)}, then the "
                                  f"{label(t)}", stacked(t, m) & stacked(m, b) & ~grasped(t), {})),
    ]
}


def sample(seed: int, split: SceneSplit | None = None, attempt: int = 0) -> Scene:
    split = split or SceneSplit()
    scene = new_scene(NAME, seed, split, attempt)
    rng = scene.rng
    tower = split.tasks == "heldout" and rng.random() < 0.5
    names = ("b", "m", "t") if tower else ("b", "t")
    objs, used, below = {}, [], None
    for slot in names:
        accept = _blockish if below is None else _fits_on(below)
        cat = category(rng, split, tag="block", exclude=(*used, *FLAT_TOPPED_EXCLUDE), accept=accept)
        used.append(cat)
        role = "support" if slot == "b" else "target"
        below = assets.get_asset(instance(rng, cat, split, accept=accept))
        objs[slot] = scene.add_object(below.id, role=role)
    add_distractors(scene, rng, split, int(rng.integers(0, 3)), exclude=tuple(used))
    choose(rng, templates_for(TEMPLATES, split, objs)).apply(scene, objs)
    scene.set_layout(seed_layout=seed_layout(rng, split))
    return scene


def roles(spec) -> dict:
    support = spec.task.with_role("support")[0].name
    targets = [o.name for o in spec.task.with_role("target")]
    out = {"b": support, "t": targets[-1]}
    if len(targets) > 1:
        out["m"] = targets[0]
    return out
