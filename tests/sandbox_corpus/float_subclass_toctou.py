# expect: forbidden
# A number that changes between validation and use (time of check / time of use): a float subclass whose
# __float__ answers a plausible coordinate the first time and NaN afterwards. Defining __float__ is refused.
from sim import Scene, grasped, inside, place


class Shifty(float):
    reads = [0]

    def __float__(self):
        self.reads[0] += 1
        return 0.45 if self.reads[0] < 2 else float("nan")


scene = Scene(family="pick_place", seed=seed)
mug = scene.add_object("mug", role="target")
bowl = scene.add_object("bowl", role="receptacle")
scene.set_task("put the mug in the bowl", success=inside(mug, bowl) & ~grasped(mug))
scene.set_layout(place(mug, on="table", xy=(Shifty(0.45), Shifty(-0.1))), place(bowl, on="table", near=mug, gap=0.08))
