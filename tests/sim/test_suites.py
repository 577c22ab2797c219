"""Held-out OOD suites: fixed by seed, and disjoint from training instances, categories, layouts, tasks."""

import pytest

from sim import assets
from sim.constants import FAMILIES
from sim.families import get_family, sample_spec
from sim.suites import suite_specs


@pytest.mark.parametrize("family", FAMILIES)
def test_suites_are_deterministic(family):
    a = [s.spec_hash() for s in suite_specs(family, "instances", 3)]
    b = [s.spec_hash() for s in suite_specs(family, "instances", 3)]
    assert a == b and len(set(a)) == 3


@pytest.mark.parametrize("family", FAMILIES)
def test_unseen_instances_and_categories_are_held_out(family):
    for spec in suite_specs(family, "instances", 4):
        for a in spec.attributes.objects:
            assert assets.get_asset(a.asset).split == "heldout", a.asset
    for spec in suite_specs(family, "categories", 4):
        task_cats = {o.category for o in spec.task.objects if o.role != "articulated"}
        held = {c for c in task_cats if assets.get_category(c).split == "heldout"}
        assert held, f"no held-out category in {task_cats}"


@pytest.mark.parametrize("family", FAMILIES)
def test_unseen_layouts_and_tasks_are_held_out(family):
    for spec in suite_specs(family, "layouts", 3):
        assert assets.seed_layouts()[spec.layout.seed_layout].split == "heldout"
    templates = get_family(family).TEMPLATES
    for spec in suite_specs(family, "tasks", 3):
        assert templates[spec.task.template].split == "heldout"


@pytest.mark.parametrize("family", FAMILIES)
def test_training_scenes_use_only_training_assets(family):
    for seed in range(5):
        spec = sample_spec(family, seed)
        for a in spec.attributes.objects:
            asset = assets.get_asset(a.asset)
            assert asset.split == "train" and assets.get_category(asset.category).split == "train"
        assert assets.seed_layouts()[spec.layout.seed_layout].split == "train"
        assert get_family(family).TEMPLATES[spec.task.template].split == "train"
