# expect: runtime
# message: a scene holds at most 10 objects
# Ten thousand objects: refused by the SDK at the 11th (the policy observes 10 objects per scene).
from sim import Scene, lifted

scene = Scene(family="pick_place", seed=seed)
first = scene.add_object("mug", role="target", name="mug_0")
for i in range(1, 10_000):
    scene.add_object("mug", role="distractor", name=f"mug_{i}")
scene.set_task("lift the mug", success=lifted(first))
