# expect: runtime
# message: place(mug): x must be a finite number, got nan
# A NaN coordinate would otherwise reach MuJoCo as a NaN body position.
from sim import Scene, lifted, place

scene = Scene(family="pick_place", seed=seed)
mug = scene.add_object("mug", role="target")
scene.set_task("lift the mug", success=lifted(mug))
scene.set_layout(place(mug, on="table", xy=(float("nan"), 0.0)))
