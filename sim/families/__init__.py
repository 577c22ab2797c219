"""Task families: each module has NAME, TEMPLATES, sample(seed, split) -> Scene and roles(spec) -> slot binding."""

from __future__ import annotations

from types import ModuleType

from sim.families import articulated, pick_place, prep, stack

FAMILIES: dict[str, ModuleType] = {m.NAME: m for m in (pick_place, stack, articulated, prep)}


def get_family(name: str) -> ModuleType:
    try:
        return FAMILIES[name]
    except KeyError:
        raise ValueError(f"unknown task family {name!r}; valid families: {', '.join(FAMILIES)}") from None


def sample_spec(family: str, seed: int, split=None, max_attempts: int = 8):
    """The seed scene of `family` for `seed` (deterministic), as a SceneSpec.

    A draw whose objects do not fit on the table is redrawn (attempt 1, 2, ...), deterministically.
    """
    from sim.layout import LayoutError

    fam = get_family(family)
    for attempt in range(max_attempts):
        try:
            return fam.sample(seed, split, attempt).spec()
        except LayoutError:
            continue
    raise LayoutError(f"no valid {family} layout for seed {seed} after {max_attempts} attempts")
