"""The asset pool as clients browse it: categories with instance counts, kind, size and split, filtered and paged
(built from the live pool, so it never drifts; the SDK reference that lists the same vocabulary: `sim.reference`).

    list_assets(tag="fruit", split="train", kind="graspable", limit=10)   # AssetPage
"""

from __future__ import annotations

import functools
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
def all_categories() -> tuple[CategoryInfo, ...]:
    """Every category of the pool, by name (computed once)."""
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

    cats = list(all_categories())
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
