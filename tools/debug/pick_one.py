import sys
sys.path.insert(0,'/work/main')
import numpy as np
from sim import Scene, place, lifted, grasped
from sim.env import CodaEnv
from sim import planner as P, helpers as h
from sim.render import Cameras, to_png
aid = sys.argv[1]
s = Scene('pick_place', seed=0)
o = s.add_object(aid, role='target', name='obj')
s.set_task('lift', success=lifted(o, 0.08) & grasped(o))
s.set_layout(place(o, xy=(0.45, -0.05), yaw=0.0))
env = CodaEnv(s.spec())
cams = Cameras(env.model, 200); frames=[]
orig = env.step
def step(a):
    r = orig(a)
    st = env.state
    print(env.steps, np.round(a,3), np.round(h.gripper_position(st),3), np.round(h.position(st,'obj'),3), 'gap', round(h.finger_gap(st),3), h.fingers_touching(st,'obj'), h.contact_objects(st, 'obj'))
    frames.append(cams.frame(env.data, 'side'))
    return r
env.step = step
d = P.run_planner(env); print(d.success)
sel = frames[4:20:2]
open('film.png','wb').write(to_png(np.concatenate(sel, axis=1)))
