import sys
sys.path.insert(0,'/work/main')
import numpy as np
from sim.families import sample_spec
from sim.env import CodaEnv
from sim import planner as P, helpers as h
spec = sample_spec(sys.argv[1], int(sys.argv[2]))
env = CodaEnv(spec)
orig = env.step
def step(a):
    r = orig(a)
    st = env.state
    art = [n for n in st.names if st.obj(n).articulated]
    o = st.obj(art[0])
    print(env.steps, np.round(a,3), 'grip', np.round(h.gripper_position(st),3), 'handle', np.round(env.data.site_xpos[o.handle_site],3), 'open', round(h.open_fraction(st, art[0]),3), 'gap', round(h.finger_gap(st),4), 'touch', h.fingers_touching(st, art[0]))
    return r
env.step = step
d = P.run_planner(env)
print(d.success)
