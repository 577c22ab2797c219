import sys
sys.path.insert(0,'/work/main')
import numpy as np
from sim import Scene, place, lifted, grasped, assets
from sim.env import CodaEnv
from sim.planner import run_planner
from sim import helpers as h
res = {}
for c in assets.categories_with(graspable=True, articulated=False):
    inst = assets.assets_in(c.name)
    ok = 0; fails=[]
    for k, a in enumerate(inst[:: max(1, len(inst)//6)][:6]):
        s = Scene('pick_place', seed=k)
        o = s.add_object(a.id, role='target', name='obj')
        s.set_task('lift', success=lifted(o, 0.08) & grasped(o))
        s.set_layout(place(o, xy=(0.45, -0.05 + 0.02*k), yaw=0.3*k))
        env = CodaEnv(s.spec())
        d = run_planner(env)
        ok += d.success
        if not d.success: fails.append((a.id, round(h.finger_gap(env.state),3)))
    res[c.name] = ok
    if ok < 6: print(c.name, ok, fails, a.half_extent, a.grasp_axis)
print(sum(v==6 for v in res.values()), len(res))
