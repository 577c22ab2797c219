# expect: runtime
# message: Circular reference
# A `meta` dict that contains itself: the trusted finalizer's serializer must stop at the cycle instead of looping
# until the time limit (or recursing until the stack is gone).
from sim import Scene, grasped, inside, place

scene = Scene(family="pick_place", seed=seed)
mug = scene.add_object("mug", role="target")
bowl = scene.add_object("bowl", role="receptacle")
scene.set_task("put the mug in the bowl", success=inside(mug, bowl) & ~grasped(mug))
scene.set_layout(place(mug, on="table", xy=(0.45, -0.10)), place(bowl, on="table", near=mug, gap=0.08))
loop = {}
loop["self"] = loop
scene.meta = loop
