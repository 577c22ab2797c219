# FAULT: the success predicate already holds at the start (verifier: predicate_false_at_start).
from sim import Scene, near, place

scene = Scene(family="pick_place", seed=seed)
mug = scene.add_object("mug", role="target")
bowl = scene.add_object("bowl", role="receptacle")
scene.set_task("keep the mug near the bowl", success=near(mug, bowl, dist=1.0))
scene.set_layout(place(mug, xy=(0.45, -0.10)), place(bowl, xy=(0.50, 0.15)))
