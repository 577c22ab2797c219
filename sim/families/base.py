"""What every task family shares: task templates, category and instance choice, the family registry shape."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from sim import assets
from sim.predicates import Predicate
from sim.scene import ObjectHandle, Scene, SceneError, SceneSplit


@dataclass(frozen=True)
class Template:
    """One instruction + predicate pattern over symbolic roles.

    `slots` names the role-slots it needs (e.g. ("t", "r")); `build` maps the bound handles to
    (instruction, success predicate, initial_state).
    """

    id: str
    split: str
    slots: tuple[str, ...]
    build: Callable[..., tuple[str, Predicate, dict]]
    requires: Callable[[dict[str, ObjectHandle]], bool] = lambda objs: True

    def apply(self, scene: Scene, objs: dict[str, ObjectHandle]) -> None:
        instruction, success, initial = self.build(**{k: objs[k] for k in self.slots})
        scene.set_task(instruction, success=success, template=self.id, initial_state=initial)


def new_scene(family: str, seed: int, split: SceneSplit, attempt: int = 0) -> Scene:
    """A Scene whose rng depends on (seed, attempt): retries after an impossible layout stay deterministic."""
    scene = Scene(family=family, seed=seed, split=split)
    if attempt:
        scene.rng = np.random.default_rng([seed, attempt])
    return scene


def label(obj: ObjectHandle) -> str:
    """How an instruction names an object: its category in words."""
    return obj.category.replace("_", " ")


def choose(rng: np.random.Generator, items: list):
    if not items:
        raise SceneError("nothing to choose from (empty candidate list)")
    return items[int(rng.integers(len(items)))]


def category(rng, split: SceneSplit, *, exclude: tuple[str, ...] = (), accept: Callable | None = None,
             strict: bool = False, **filters) -> str | None:
    """A category name matching the filters, from the split's side when that side has one.

    With `accept(asset)`, only categories with at least one accepted instance count; when there is none, like
    `instance`, it ignores `accept` (or, if `strict`, returns None).
    """

    def ok(c, check) -> bool:
        return c.name not in exclude and (check is None or any(map(check, _pool(c.name, split))))

    for check in (accept,) if strict else dict.fromkeys((accept, None)):
        for side in _sides(split.categories):
            cats = [c.name for c in assets.categories_with(split=side, **filters) if ok(c, check)]
            if cats:
                return choose(rng, sorted(cats))
    return None if strict else choose(rng, [])


def _sides(side: str) -> tuple:
    """Where to look, in order: the side itself, then (for "seed", a subset of train) train, then anywhere."""
    return (side, "train", None) if side == "seed" else (side, None)


def _pool(category_name: str, split: SceneSplit) -> list:
    return assets.instances_for(category_name, split.instances)


def instance(rng, category_name: str, split: SceneSplit, accept: Callable | None = None) -> str:
    """An instance id of the category from the split's side, optionally filtered by `accept(asset)`."""
    pool = _pool(category_name, split)
    good = [a for a in pool if accept is None or accept(a)] or pool
    return choose(rng, good).id


def seed_layout(rng, split: SceneSplit) -> int:
    ids = [lay.id for lay in assets.layouts_on(split.layouts)]
    return int(choose(rng, ids))


def templates_for(templates: dict[str, Template], split: SceneSplit, objs: dict[str, ObjectHandle]) -> list[Template]:
    tasks = "train" if split.tasks == "seed" else split.tasks
    side = [t for t in templates.values() if t.split == tasks and all(s in objs for s in t.slots)]
    return [t for t in side if t.requires(objs)]


def add_distractors(scene: Scene, rng, split: SceneSplit, n: int, exclude: tuple[str, ...]) -> None:
    for _ in range(n):
        cat = category(rng, split, graspable=True, exclude=exclude)
        scene.add_object(instance(rng, cat, split), role="distractor")
