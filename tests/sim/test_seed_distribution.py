"""The narrow seed distribution a base policy is trained on: a fixed subset of the train side on every factor."""

import pytest

from policy.evaluate import train_specs
from sim import assets
from sim.constants import FAMILIES
from sim.families import get_family
from sim.suites import EVAL_SEED_BASE, suite_seed, suite_specs


def test_seed_side_is_a_small_subset_of_train():
    for c in assets.categories_with(split="seed"):
        assert c.split == "train"
        seed = assets.assets_in(c.name, split="seed")
        train = assets.assets_in(c.name, split="train")
        assert seed == train[: len(seed)] and 0 < len(seed) < len(train)
    n_seed, n_train = len(assets.categories_with(split="seed")), len(assets.categories_with(split="train"))
    assert n_seed < n_train / 2
    seed_lays, train_lays = assets.layouts_on("seed"), assets.layouts_on("train")
    assert {lay.id for lay in seed_lays} < {lay.id for lay in train_lays} and len(seed_lays) * 10 < len(train_lays)


def test_unknown_side_is_refused_with_the_valid_ones():
    with pytest.raises(ValueError, match="'seed'"):
        assets.assets_in("apple", split="narrow")
    with pytest.raises(ValueError, match="distribution must be one of train, seed"):
        train_specs("stack", 2, distribution="narrow")


@pytest.mark.parametrize("family", FAMILIES)
def test_seed_scenes_draw_from_the_seed_side(family):
    seed_cats = {c.name for c in assets.categories_with(split="seed")}
    seed_layouts = {lay.id for lay in assets.layouts_on("seed")}
    templates = get_family(family).TEMPLATES
    specs = train_specs(family, 12, start=300_000, distribution="seed")
    for spec in specs:
        assert spec.layout.seed_layout in seed_layouts
        assert templates[spec.task.template].split == "train"
        for a in spec.attributes.objects:
            asset = assets.get_asset(a.asset)
            assert asset.split == "train"
            assert asset in assets.instances_for(asset.category, "seed")
    used = {o.category for s in specs for o in s.task.objects}
    assert used & seed_cats and len(used - seed_cats) <= len(used) // 3, used - seed_cats


@pytest.mark.parametrize("family", ["pick_place", "prep"])
def test_the_seed_suite_is_fixed_and_apart_from_training_and_other_suites(family):
    a = [s.spec_hash() for s in suite_specs(family, "seed", 4)]
    assert a == [s.spec_hash() for s in suite_specs(family, "seed", 4)] and len(set(a)) == 4
    assert not set(a) & {s.spec_hash() for s in train_specs(family, 40, start=0, distribution="seed")}
    others = [suite_seed(s, 0) for s in ("in", "instances", "layouts", "tasks", "categories")]
    assert suite_seed("seed", 0) > max(others) >= EVAL_SEED_BASE


def test_default_training_scenes_still_range_over_the_whole_train_side():
    seed_layouts = {lay.id for lay in assets.layouts_on("seed")}
    specs = train_specs("stack", 20, start=300_000)
    assert sum(s.layout.seed_layout not in seed_layouts for s in specs) >= 15


def test_a_base_trained_on_the_seed_side_keeps_its_distribution(tmp_path):
    from policy.service import TrainerService

    service = TrainerService(tmp_path)
    out = service.sft(["pick_place"], 2, 2, distribution="seed")
    assert out["demos"] == 2 and service.state.extra["distribution"] == "seed"
    seed_layouts = {lay.id for lay in assets.layouts_on("seed")}
    demos = service.demos["pick_place:2:seed"]
    assert len(demos) == 2 and "pick_place:2" not in service.demos
    specs = {s.spec_hash(): s for s in train_specs("pick_place", 2, start=300_000, distribution="seed")}
    assert all(specs[d.spec_hash].layout.seed_layout in seed_layouts for d in demos)
