# expect: runtime
# message: mass=inf: Input should be a finite number
# An infinite mass (1e400 overflows to inf) is refused like NaN.
from sim import Scene, lifted

scene = Scene(family="pick_place", seed=seed)
mug = scene.add_object("mug", role="target")
scene.set_task("lift the mug", success=lifted(mug))
scene.set_attributes(mug, mass=1e400)
