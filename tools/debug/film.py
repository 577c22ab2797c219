import sys
sys.path.insert(0,'/work/main')
import numpy as np
from sim.families import sample_spec
from sim.env import CodaEnv
from sim import planner as P, helpers as h
from sim.render import Cameras, to_png
fam, seed = sys.argv[1], int(sys.argv[2]); cam = sys.argv[3] if len(sys.argv)>3 else 'side'
spec = sample_spec(fam, seed)
env = CodaEnv(spec)
frames = []
cams = Cameras(env.model, 200)
orig = env.step
def step(a):
    r = orig(a)
    if env.steps % 2 == 0: frames.append(cams.frame(env.data, cam))
    return r
env.step = step
d = P.run_planner(env)
print(d.success, d.steps, d.subgoals, env.predicate_terms())
rows = [np.concatenate(frames[i:i+8] + [np.zeros_like(frames[0])]*(8-len(frames[i:i+8])), axis=1) for i in range(0, min(len(frames), 32), 8)]
open('film.png','wb').write(to_png(np.concatenate(rows, axis=0)))
