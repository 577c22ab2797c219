# expect: output
# message: 4300 digits
# A 100,001-digit integer in `meta`: converting it to JSON text is quadratic, and a forged answer carrying one would
# make the server's parser do the work. CPython's integer-string limit refuses it in the child.
from sim import Scene, grasped, inside, place

scene = Scene(family="pick_place", seed=seed)
mug = scene.add_object("mug", role="target")
bowl = scene.add_object("bowl", role="receptacle")
scene.set_task("put the mug in the bowl", success=inside(mug, bowl) & ~grasped(mug))
scene.set_layout(place(mug, on="table", xy=(0.45, -0.10)), place(bowl, on="table", near=mug, gap=0.08))
scene.meta = {"big": 10 ** 100_000}
