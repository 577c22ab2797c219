# FAULT: the success predicate can never hold (verifier: predicate_satisfiable) — the mug cannot be both held
# and let go of; without this check only the planner (verify ... --planner) would find out.
from sim import Scene, grasped, inside, place

scene = Scene(family="pick_place", seed=seed)
mug = scene.add_object("mug", role="target")
bowl = scene.add_object("bowl", role="receptacle")
scene.set_task("put the mug in the bowl", success=inside(mug, bowl) & grasped(mug) & ~grasped(mug))
scene.set_layout(place(mug, xy=(0.45, -0.10)), place(bowl, xy=(0.50, 0.15)))
