# FAULT: a block balanced on top of a ball rolls off (verifier: stable).
from sim import Scene, grasped, inside, place

scene = Scene(family="pick_place", seed=seed)
ball = scene.add_object("ball", role="support")
block = scene.add_object("block", role="target")
bowl = scene.add_object("bowl", role="receptacle")
scene.set_task("put the block in the bowl", success=inside(block, bowl) & ~grasped(block))
scene.set_layout(place(ball, xy=(0.42, -0.12)), place(block, on=ball), place(bowl, xy=(0.50, 0.15)))
