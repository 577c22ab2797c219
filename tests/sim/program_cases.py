"""Scene programs whose specs the program-facing SDK (`sim.program`) must reproduce exactly.

`tests/sim/fixtures/program_specs.json` holds the spec (or error) each case gave through the trusted
`sim.scene` API before the facade existed; regenerate it with `python -m tests.sim.program_cases` (trusted
path: real `sim`, plain `exec`) only when a deliberate change to the SDK changes specs.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "program_specs.json"
EXAMPLES = ROOT / "examples" / "scenes"
CORPUS = ROOT / "tests" / "sandbox_corpus"

RNG_PROGRAM = """\
# every scene.rng method, interleaved with the SDK's own draws (add_object picks instances, set_layout slots)
from sim import Scene, grasped, inside, lifted, place

scene = Scene(family="pick_place", seed=seed)
rng = scene.rng
names = ["apple", "lemon", "can", "orange"]
rng.shuffle(names)
order = rng.permutation(4)
others = rng.permutation(["x", "y", "z"])
target = scene.add_object(names[0], role="target")
bowl = scene.add_object(rng.choice(["bowl", "plate", "crate"]), role="receptacle")
for i in range(int(rng.integers(1, 3))):
    scene.add_object(names[1 + i], role="distractor")
x = float(rng.uniform(0.35, 0.55))
y = rng.uniform(-0.2, 0.0)
yaw = rng.normal(0.0, 0.3)
pick = rng.choice(4, size=2, replace=False)
noise = rng.uniform(-0.01, 0.01, size=2)
height = 0.1 + 0.05 * rng.random()
scene.set_task("put it away", success=(inside(target, bowl) & ~grasped(target)) | lifted(target, height=height))
scene.set_layout(place(target, xy=(x + noise[0], y + noise[1]), yaw=yaw), place(bowl, near=target, gap=0.1))
scene.set_attributes(target, mass=round(rng.uniform(0.1, 0.3), 3), rgba=["red", "blue"][int(order[0]) % 2])
scene.meta["order"] = [int(v) for v in order]
scene.meta["pick"] = [int(v) for v in pick]
scene.meta["others"] = [str(v) for v in others]
scene.meta["int"] = int(rng.integers(10, endpoint=True))
scene.meta["normal"] = round(float(rng.standard_normal()), 6)
"""

NUMPY_PROGRAM = """\
# numpy and math inside a scene program, including numpy's global RNG (the sandbox seeds it with `seed`)
import math

import numpy as np
from sim import Scene, near, on, place, upright

scene = Scene(family="prep", seed=seed)
board = scene.add_object("cutting_board", role="receptacle")
fruit = scene.add_object("tomato", role="target")
spare = scene.add_object("lime", role="distractor")
angle = np.deg2rad(30.0) + 0.1 * np.random.uniform(-1.0, 1.0)
r = float(np.clip(0.12 + 0.02 * np.random.random(), 0.1, 0.2))
centre = np.array([0.48, 0.05])
offset = np.array([math.cos(angle), np.sin(angle)]) * r
spot = centre - offset
other = np.random.default_rng(seed + 1)
scene.set_task("put the tomato on the board", success=on(fruit, board) & upright(fruit, tol_deg=30) & near(fruit, board, dist=np.hypot(0.05, 0.05)))
scene.set_layout(
    place(board, xy=tuple(centre)),
    place(fruit, xy=(float(spot[0]), float(spot[1])), yaw=np.pi / 4),
    place(spare, xy=(0.36 + other.uniform(0.0, 0.02), -0.22), yaw=float(np.arctan2(1.0, 2.0))),
)
scene.set_attributes(fruit, mass=float(np.mean([0.1, 0.12, 0.14])), friction=float(np.linalg.norm([0.6, 0.8])))
scene.meta["distance"] = round(float(np.sqrt(np.sum((spot - centre) ** 2))), 6)
"""

FEATURES_PROGRAM = """\
# the rest of the API: import sim, SceneSplit, ObjectHandle fields, objects(), initial_state, every predicate
import sim
from sim import SceneError, SceneSplit, open_fraction, stacked

scene = sim.Scene(family="articulated", seed=seed, split=SceneSplit(instances="heldout"))
drawer = scene.add_object("drawer", role="articulated")
block = scene.add_object("block", role="target", name="red_block")
base = scene.add_object("block/001", role="support", name="base")
try:
    scene.add_object("block", role="hero")
except SceneError as exc:
    scene.meta["error"] = str(exc)
names = [h.name for h in scene.objects()]
scene.meta["objects"] = names
scene.meta["categories"] = [h.category + ":" + h.role for h in scene.objects()]
scene.meta["split"] = scene.split.instances + "/" + scene.split.tasks
scene.meta["family"] = scene.family
scene.meta["seed"] = scene.seed
success = open_fraction(drawer, min=0.2, max=0.9) | (stacked(block, base) & sim.upright(block)) | ~sim.near(block, drawer, dist=0.3)
scene.meta["predicate"] = str(success)
scene.set_task("open the drawer or stack", success=success, template="mixed", initial_state={drawer: {"open": 0.25}})
scene.set_layout(sim.place(block, on="table", xy=(0.42, 0.15)), sim.place(base, near=block, gap=0.09), seed_layout=3)
scene.set_attributes(drawer, damping=0.4, joint_range=(0.0, 0.2))
scene.set_attributes(block, rgba=(0.2, 0.3, 0.4, 1.0), scale=1.1, friction=0.7)
scene.set_attributes(base, asset="block/002", rgba="green")
"""

CORPUS_SCENES = ("scene_10000_objects.py", "scene_infinite_mass.py", "scene_nan_mass.py",
                 "scene_nan_position.py", "scene_negative_mass.py")
FAMILIES = ("pick_place", "stack", "articulated", "prep")


def cases() -> list[tuple[str, str, int]]:
    """(key, source, seed) of every case whose source is fixed by the repository (the fixture adds the
    `to_program` cases, whose source it stores)."""
    out = []
    for name in ("pick_place.py", "prep.py", "stack.py", "articulated.py"):
        for seed in (0, 1, 7):
            out.append((f"example:{name}:{seed}", (EXAMPLES / name).read_text(), seed))
    for seed in (0, 1, 2, 5):
        out.append((f"rng:{seed}", RNG_PROGRAM, seed))
    for seed in (0, 4):
        out.append((f"numpy:{seed}", NUMPY_PROGRAM, seed))
    for seed in (0, 3):
        out.append((f"features:{seed}", FEATURES_PROGRAM, seed))
    for name in CORPUS_SCENES:
        out.append((f"corpus:{name}", (CORPUS / name).read_text(), 0))
    return out


def seed_rngs(seed: int) -> None:
    """What the sandbox child does before a program runs (`sim.sandbox.child._seed_rngs`)."""
    import numpy as np

    random.seed(seed)
    np.random.seed(seed % (1 << 32))


def run_trusted(source: str, seed: int) -> dict:
    """The spec (or the error) a program gives through the trusted API: real `sim`, plain exec."""
    from sim.scene import finalize_program

    namespace = {"seed": seed}
    seed_rngs(seed)
    try:
        exec(compile(source, "<program>", "exec"), namespace)  # trusted: the repository's own programs
        return {"spec": finalize_program(namespace, {"globals": {"seed": seed}})}
    except Exception as exc:  # noqa: BLE001
        return {"error": f"{type(exc).__name__}: {exc}"}


def capture() -> dict:
    from sim.families import sample_spec
    from sim.scene import to_program

    out = {}
    for key, source, seed in cases():
        out[key] = {"seed": seed, **run_trusted(source, seed)}
    for family in FAMILIES:
        for seed in (0, 3):
            source = to_program(sample_spec(family, seed))
            out[f"to_program:{family}:{seed}"] = {"seed": seed, "source": source, **run_trusted(source, seed)}
    return out


if __name__ == "__main__":
    FIXTURE.write_text(json.dumps(capture(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {FIXTURE}", file=sys.stderr)
