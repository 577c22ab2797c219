"""Instances drawn for objects added by category: deterministic per program and seed, independent across programs
and objects (the k-th object of every program used to get the k-th draw of `default_rng(seed)`)."""

from sim import Scene, SceneSplit, assets, grasped, inside, open_fraction
from sim.sandbox import run_untrusted
from sim.spec import SceneSpec

SEEDS = range(300)

DRAWER_AND_LEMON = """from sim import Scene, grasped, inside, open_fraction
scene = Scene(family="articulated", seed=seed)
drawer = scene.add_object("drawer", role="articulated")
lemon = scene.add_object("lemon", role="target")
scene.set_task("put the lemon in the drawer", success=inside(lemon, drawer) & ~grasped(lemon),
               initial_state={drawer: {"open": 0.9}})
"""


def drawer_and_lemon(seed: int) -> SceneSpec:
    """The program above, built with the trusted SDK in this process."""
    scene = Scene(family="articulated", seed=seed)
    drawer = scene.add_object("drawer", role="articulated")
    lemon = scene.add_object("lemon", role="target")
    scene.set_task("put the lemon in the drawer", success=inside(lemon, drawer) & ~grasped(lemon),
                   initial_state={drawer: {"open": 0.9}})
    return scene.spec()


def open_drawer(seed: int) -> SceneSpec:
    """Another program whose first object is a drawer too."""
    scene = Scene(family="articulated", seed=seed)
    drawer = scene.add_object("drawer", role="articulated")
    scene.set_task("open the drawer", success=open_fraction(drawer, min=0.6))
    return scene.spec()


def asset(spec: SceneSpec, name: str) -> str:
    return spec.attributes.of(name).asset


def test_same_program_and_seed_draw_the_same_instances_in_process_and_in_the_sandbox():
    for seed in (0, 1, 7):
        spec = drawer_and_lemon(seed)
        assert spec == drawer_and_lemon(seed)
        sandboxed = run_untrusted(DRAWER_AND_LEMON, finalizer="sim.scene:finalize_program",
                                  inputs={"globals": {"seed": seed}})
        assert sandboxed.ok, sandboxed.error
        assert SceneSpec.model_validate(sandboxed.value).spec_hash() == spec.spec_hash()


def test_the_draw_ignores_scene_rng_and_the_order_of_spec_calls():
    scene = Scene(family="articulated", seed=3)
    scene.rng.random(10)  # a program's own draws do not move the instance
    drawer = scene.add_object("drawer", role="articulated")
    scene.set_task("open the drawer", success=open_fraction(drawer, min=0.6))
    assert asset(scene.spec(), "drawer") == asset(scene.spec(), "drawer") == asset(open_drawer(3), "drawer")


def test_first_objects_of_two_programs_collide_only_by_chance():
    """Both programs start with add_object("drawer"): at a shared seed they used to get the same drawer always."""
    pool = len(assets.assets_in("drawer", split="train"))
    same = sum(asset(drawer_and_lemon(s), "drawer") == asset(open_drawer(s), "drawer") for s in SEEDS)
    assert same < 3 * len(SEEDS) / pool, f"{same} of {len(SEEDS)} seeds drew the same drawer ({pool} in the pool)"
    drawn = {asset(open_drawer(s), "drawer") for s in SEEDS}
    assert len(drawn) > pool / 2, f"only {len(drawn)} of {pool} drawers drawn"


def test_objects_of_one_category_in_one_program_draw_independently():
    pool = len(assets.assets_in("block", split="train"))

    def blocks(seed: int) -> tuple[str, str]:
        scene = Scene(family="stack", seed=seed)
        a, b = scene.add_object("block", role="target"), scene.add_object("block", role="support")
        scene.set_task("stack the blocks", success=inside(a, b))
        spec = scene.spec()
        return asset(spec, a.name), asset(spec, b.name)

    same = sum(a == b for a, b in map(blocks, SEEDS))
    assert same < 3 * len(SEEDS) / pool, f"{same} of {len(SEEDS)} seeds drew the same block twice ({pool} blocks)"


def test_draws_stay_on_the_scene_split_and_a_chosen_asset_is_kept():
    for seed in range(20):
        scene = Scene(family="articulated", seed=seed, split=SceneSplit(instances="heldout"))
        drawer = scene.add_object("drawer", role="articulated")
        lemon = scene.add_object("lemon", role="target")
        scene.set_attributes(lemon, asset="lemon/003")
        scene.set_task("put the lemon in the drawer", success=inside(lemon, drawer))
        spec = scene.spec()
        assert assets.get_asset(asset(spec, "drawer")).split == "heldout"
        assert asset(spec, "lemon") == "lemon/003"
