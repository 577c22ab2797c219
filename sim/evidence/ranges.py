"""What training covered: attribute ranges per category, task templates and predicate relations.

The failure critic compares a scene against these to tell an attribute or task novelty from an execution
failure. The default (`TrainingRanges.default()`) is what the seed families draw on their train side: category
mass and friction ranges from `sim.assets`, articulated damping over the train instances, unit scale, and the
train templates of `sim.families`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache

from sim import assets
from sim.families import FAMILIES
from sim.scene import ObjectHandle

MASS_SLACK = 1.25
"""a mass counts as outside the range beyond max × MASS_SLACK or below min / MASS_SLACK"""
FRICTION_SLACK = 0.7
"""a friction counts as low below min × FRICTION_SLACK"""
DAMPING_SLACK = 3.0


def relation_signature(pred) -> tuple[str, ...]:
    """Sorted relation words of a predicate, args dropped: ('inside', 'open_fraction[close]', '~grasped')."""
    out: set[str] = set()

    def walk(node, negated: bool) -> None:
        if node.op == "not":
            walk(node.term, not negated)
        elif node.op in ("and", "or"):
            for t in node.terms:
                walk(t, negated)
        else:
            out.add(("~" if negated else "") + node.op + (_opening(node) if node.op == "open_fraction" else ""))

    walk(pred, False)
    return tuple(sorted(out))


def _opening(atom) -> str:
    """open_fraction kinds: [open] (at least some opening), [close] (at most), [range] (between)."""
    lo, hi = atom.param("min"), atom.param("max")
    if lo > 0.0 and hi < 1.0:
        return "[range]"
    return "[open]" if lo > 0.0 else "[close]"


@dataclass(frozen=True)
class TrainingRanges:
    mass: dict[str, tuple[float, float]]
    friction: dict[str, tuple[float, float]]
    damping: dict[str, tuple[float, float]]
    scale: tuple[float, float] = (0.9, 1.1)
    templates: frozenset[str] = field(default_factory=frozenset)
    relations: frozenset[tuple[str, ...]] = field(default_factory=frozenset)

    @classmethod
    def default(cls) -> TrainingRanges:
        return _default()

    def template_seen(self, template: str) -> bool | None:
        """None for custom tasks (their relations decide)."""
        return None if template == "custom" else template in self.templates

    def relations_seen(self, pred) -> bool:
        return relation_signature(pred) in self.relations

    def out_of_range(self, category: str, *, mass=None, friction=None, scale=1.0, damping=None) -> list[str]:
        """Sentences naming each attribute outside the training range."""
        out = []
        if mass is not None and category in self.mass:
            lo, hi = self.mass[category]
            if mass > hi * MASS_SLACK or mass < lo / MASS_SLACK:
                out.append(f"mass {mass:.3g} kg outside the training range {lo:g}-{hi:g} kg")
        if friction is not None and category in self.friction:
            lo, _ = self.friction[category]
            if friction < lo * FRICTION_SLACK:
                out.append(f"friction {friction:.3g} below the training minimum {lo:g}")
        if not self.scale[0] <= scale <= self.scale[1]:
            out.append(f"scale {scale:.3g} outside the training range {self.scale[0]:g}-{self.scale[1]:g}")
        if damping is not None and category in self.damping:
            lo, hi = self.damping[category]
            if damping > hi * DAMPING_SLACK or damping < lo / DAMPING_SLACK:
                out.append(f"joint damping {damping:.3g} outside the training range {lo:.3g}-{hi:.3g}")
        return out


@cache
def _default() -> TrainingRanges:
    cats = assets.categories()
    damping: dict[str, list[float]] = {}
    for a in assets.articulated_assets().values():
        if a.split == "train":
            damping.setdefault(a.category, []).append(a.damping)
    templates, relations = set(), set()
    for fam in FAMILIES.values():
        for t in fam.TEMPLATES.values():
            if t.split != "train":
                continue
            templates.add(t.id)
            handles = {s: ObjectHandle(s, "block", "target") for s in t.slots}
            relations.add(relation_signature(t.build(**handles)[1]))
    return TrainingRanges(
        mass={n: c.mass_range for n, c in cats.items() if not c.articulated},
        friction={n: c.friction_range for n, c in cats.items()},
        damping={k: (min(v), max(v)) for k, v in damping.items()},
        templates=frozenset(templates),
        relations=frozenset(relations),
    )
