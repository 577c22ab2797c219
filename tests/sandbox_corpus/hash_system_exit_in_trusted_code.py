# expect: runtime
# message: SystemExit
# An object name whose __hash__ raises SystemExit while trusted SDK code (a dict of names) hashes it: the child must
# report a runtime error, not exit quietly with "no result" or take the zygote down.
from sim import Scene, grasped, inside


class ExitingName(str):
    def __hash__(self):
        raise SystemExit("raised from __hash__ inside the SDK")


scene = Scene(family="pick_place", seed=seed)
mug = scene.add_object("mug", role="target", name=ExitingName("mug"))
bowl = scene.add_object("bowl", role="receptacle")
scene.set_task("put the mug in the bowl", success=inside(mug, bowl) & ~grasped(mug))
