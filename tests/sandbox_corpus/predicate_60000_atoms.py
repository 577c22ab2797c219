# expect: runtime
# message: more than the limit of 64 atoms
# A scene that looks valid, whose success predicate has 65,536 atoms (60,000+): spelled as a flat `&` (doubling),
# a flat `|`, raw predicate data, a deeply nested `~`, and a shared sub-term DAG (2**40 atoms in 80 objects). The
# SDK or the spec must refuse it; whatever set_task accepts, the last spelling is left for the verifier.
from sim import Scene, grasped, inside, near, place

scene = Scene(family="pick_place", seed=seed)
mug = scene.add_object("mug", role="target")
bowl = scene.add_object("bowl", role="receptacle")
scene.set_layout(place(mug, on="table", xy=(0.45, -0.10)), place(bowl, on="table", near=mug, gap=0.08))
outcome = {}


def try_task(label, make):
    try:
        scene.set_task("put the mug in the bowl", success=make())
        outcome[label] = 'accepted by set_task'
    except Exception as exc:
        outcome[label] = 'refused: ' + str(exc)[:60]


def doubled(op):
    p = near(mug, bowl)
    for _ in range(16):
        p = (p & p) if op == 'and' else (p | p)
    return p


def nested():
    p = grasped(mug)
    for _ in range(60000):
        p = ~p
    return p


def shared():
    p = inside(mug, bowl)
    for _ in range(40):
        p = ~(p | p)
    return p


raw_atom = {'op': 'near', 'args': ['mug', 'bowl'], 'params': {'dist': 0.1}}
try_task('flat |', lambda: doubled('or'))
try_task('raw data', lambda: {'op': 'and', 'terms': [raw_atom] * 60000})
try_task('nested ~', nested)
try_task('shared DAG', shared)
scene.meta = {'outcome': outcome}
scene.set_task("put the mug in the bowl", success=doubled('and') & ~grasped(mug))
