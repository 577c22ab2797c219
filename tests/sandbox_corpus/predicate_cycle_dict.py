# expect: runtime
# message: nested deeper than the limit
# A success predicate given as raw data that contains itself (an "and" whose only term is the same dict): an
# infinite tree in a few bytes. The size check must stop at its depth limit instead of walking forever.
from sim import Scene

scene = Scene(family="pick_place", seed=seed)
mug = scene.add_object("mug", role="target")
bowl = scene.add_object("bowl", role="receptacle")
cycle = {"op": "and", "terms": []}
cycle["terms"].append(cycle)
scene.set_task("put the mug in the bowl", success=cycle)
