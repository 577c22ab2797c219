# FAULT: a bottle balanced off-centre on top of a can topples over (verifier: stable).
from sim import Scene, grasped, inside, place

scene = Scene(family="pick_place", seed=seed)
can = scene.add_object("can", role="support")
bottle = scene.add_object("water_bottle", role="target")
bowl = scene.add_object("bowl", role="receptacle")
scene.set_task("put the bottle in the bowl", success=inside(bottle, bowl) & ~grasped(bottle))
scene.set_layout(place(can, xy=(0.42, -0.12)), place(bottle, on=can, xy=(0.455, -0.12)), place(bowl, xy=(0.50, 0.15)))
