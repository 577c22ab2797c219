# expect: runtime
# message: mass=-2.5: Input should be greater than 0
# A scene program that runs, but gives the bowl a negative mass: the SDK refuses it with a SceneError.
from sim import Scene, grasped, inside, place

scene = Scene(family="pick_place", seed=seed)
mug = scene.add_object("mug", role="target")
bowl = scene.add_object("bowl", role="receptacle")
scene.set_task("put the mug in the bowl", success=inside(mug, bowl) & ~grasped(mug))
scene.set_layout(place(mug, on="table", xy=(0.45, -0.10)), place(bowl, on="table", near=mug, gap=0.08))
scene.set_attributes(bowl, mass=-2.5)
