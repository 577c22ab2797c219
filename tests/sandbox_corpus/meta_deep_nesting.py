# expect: runtime
# message: meta is nested deeper than
# A valid scene whose free-form `meta` is a list nested 900 deep: harmless to build in the child, but the spec is
# serialized there and parsed, validated and hashed by the trusted side. It must be refused in the child, readably,
# and never reach the server as a structure that exhausts its stack.
from sim import Scene, grasped, inside, place

scene = Scene(family="pick_place", seed=seed)
mug = scene.add_object("mug", role="target")
bowl = scene.add_object("bowl", role="receptacle")
scene.set_task("put the mug in the bowl", success=inside(mug, bowl) & ~grasped(mug))
scene.set_layout(place(mug, on="table", xy=(0.45, -0.10)), place(bowl, on="table", near=mug, gap=0.08))
deep = []
for _ in range(900):
    deep = [deep]
scene.meta = {"deep": deep}
