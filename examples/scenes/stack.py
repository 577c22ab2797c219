# Stack the red block on the blue one (stack).
from sim import Scene, grasped, place, stacked

scene = Scene(family="stack", seed=seed)
top = scene.add_object("block", role="target", name="red_block")
base = scene.add_object("block", role="support", name="blue_block")
scene.add_object("apple", role="distractor")
scene.set_task("stack the red block on the blue block", success=stacked(top, base) & ~grasped(top))
scene.set_layout(place(top, xy=(0.40, 0.12)), place(base, xy=(0.52, -0.08)))
scene.set_attributes(top, rgba="red")
scene.set_attributes(base, rgba="blue")
