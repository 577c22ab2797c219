# FAULT: two objects occupy the same place (verifier: collision_free).
from sim import Scene, grasped, inside, place

scene = Scene(family="pick_place", seed=seed)
mug = scene.add_object("mug", role="target")
can = scene.add_object("can", role="distractor")
bowl = scene.add_object("bowl", role="receptacle")
scene.set_task("put the mug in the bowl", success=inside(mug, bowl) & ~grasped(mug))
scene.set_layout(place(mug, xy=(0.45, -0.10)), place(can, xy=(0.455, -0.10)), place(bowl, xy=(0.50, 0.15)))
