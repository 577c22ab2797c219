# expect: runtime
# A success predicate given as raw data (dicts, which set_task passes on as they are) whose sub-terms are shared: 41
# dicts that spell a tree of 2**40 atoms. It must be refused by the size cap, quickly and readably (set_task checks
# raw data before anything copies or renders it).
from sim import Scene, place

scene = Scene(family="pick_place", seed=seed)
mug = scene.add_object("mug", role="target")
bowl = scene.add_object("bowl", role="receptacle")
scene.set_layout(place(mug, on="table", xy=(0.45, -0.10)), place(bowl, on="table", near=mug, gap=0.08))
success = {'op': 'near', 'args': ['mug', 'bowl'], 'params': {'dist': 0.1}}
for _ in range(40):
    success = {'op': 'not', 'term': {'op': 'or', 'terms': [success, success]}}
scene.set_task("put the mug near the bowl", success=success)
