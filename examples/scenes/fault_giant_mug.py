# FAULT: a 3 m mug (verifier: scale_plausible).
from sim import Scene, grasped, inside, place

scene = Scene(family="pick_place", seed=seed)
mug = scene.add_object("mug", role="target")
bowl = scene.add_object("bowl", role="receptacle")
scene.set_task("put the mug in the bowl", success=inside(mug, bowl) & ~grasped(mug))
scene.set_layout(place(mug, xy=(0.45, -0.10)), place(bowl, xy=(0.50, 0.15)))
scene.set_attributes(mug, scale=30.0)
