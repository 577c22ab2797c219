# expect: runtime
# message: at most 500 characters
# A str subclass that lies about itself (len() says 1, strip() returns itself) as the task instruction: the spec is
# validated from its serialized form, so the lie does not reach the trusted side and the length limit holds.
from sim import Scene, grasped, inside, place


class Liar(str):
    def __len__(self):
        return 1

    def strip(self, *chars):
        return self


scene = Scene(family="pick_place", seed=seed)
mug = scene.add_object("mug", role="target")
bowl = scene.add_object("bowl", role="receptacle")
scene.set_task(Liar("x" * 5000), success=inside(mug, bowl) & ~grasped(mug))
scene.set_layout(place(mug, on="table", xy=(0.45, -0.10)), place(bowl, on="table", near=mug, gap=0.08))
