"""The asset catalogue and the SDK reference, as served to agents (built from the live SDK, so they never drift)."""

from __future__ import annotations

import functools
import inspect
import re
import textwrap
from typing import Literal

from pydantic import BaseModel, Field


class CategoryInfo(BaseModel):
    name: str
    split: Literal["train", "heldout"] = Field(description="held-out categories are reserved for the OOD suite")
    articulated: bool
    graspable: bool
    container: bool = Field(description="has a cavity: objects can be put inside")
    surface: bool = Field(description="objects can be placed on it")
    tags: list[str]
    instances: int
    train_instances: int
    heldout_instances: int
    size_m: tuple[float, float] = Field(description="smallest and largest bounding-box side of its instances, metres")
    mass_kg: tuple[float, float]


class AssetPage(BaseModel):
    """Asset categories matching the filters (one page) and pool-wide counts."""

    total: int = Field(description="categories matching the filters")
    offset: int
    categories: list[CategoryInfo]
    pool: dict[str, int] = Field(description="whole-pool counts (instances, layouts, held-out shares)")


@functools.cache
def _all_categories() -> tuple[CategoryInfo, ...]:
    from sim import assets

    out = []
    for c in assets.categories().values():
        inst = assets.assets_in(c.name)
        out.append(
            CategoryInfo(
                name=c.name,
                split=c.split,
                articulated=c.articulated,
                graspable=c.graspable,
                container=c.container,
                surface=c.surface,
                tags=list(c.tags),
                instances=len(inst),
                train_instances=sum(a.split == "train" for a in inst),
                heldout_instances=sum(a.split == "heldout" for a in inst),
                size_m=(round(min(c.dims_low), 3), round(max(c.dims_high), 3)),
                mass_kg=(round(c.mass_range[0], 3), round(c.mass_range[1], 3)),
            )
        )
    return tuple(sorted(out, key=lambda c: c.name))


def list_assets(
    tag: str | None = None,
    split: str | None = None,
    kind: Literal["any", "graspable", "container", "surface", "articulated"] = "any",
    offset: int = 0,
    limit: int = 50,
) -> AssetPage:
    """Categories filtered by tag, split and kind, one page at a time."""
    from sim import assets

    cats = list(_all_categories())
    if tag is not None:
        tags = sorted({t for c in cats for t in c.tags})
        if tag not in tags:
            raise ValueError(f"unknown tag {tag!r}; valid tags: {', '.join(tags)}")
        cats = [c for c in cats if tag in c.tags]
    if split is not None:
        if split not in ("train", "heldout"):
            raise ValueError(f"split must be 'train' or 'heldout', got {split!r}")
        cats = [c for c in cats if c.split == split]
    if kind != "any":
        cats = [c for c in cats if getattr(c, kind)]
    return AssetPage(total=len(cats), offset=offset, categories=cats[offset : offset + limit], pool=assets.summary())


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
    for name in ("add_object", "set_task", "set_layout", "set_attributes", "objects"):
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
        "## Vocabulary",
        "",
        f"- families: {', '.join(FAMILIES)}",
        f"- roles: {', '.join(ROLES)}",
        f"- scene factors (resample one, keep the others): {', '.join(FACTORS)}",
        f"- named colours for `rgba`: {', '.join(COLORS)}",
        "- categories by kind (see the `sim://assets` resource or `list_assets` for tags, sizes and splits):",
    ]
    cats = _all_categories()
    for kind in ("graspable", "container", "surface", "articulated"):
        names = [c.name + ("*" if c.split == "heldout" else "") for c in cats if getattr(c, kind)]
        lines.append(f"  - {kind}: {', '.join(names)}")
    lines.append("  (* = held-out category: used only by the OOD evaluation suite)")
    return "\n".join(lines) + "\n"
