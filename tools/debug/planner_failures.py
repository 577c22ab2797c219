import sys
sys.path.insert(0,'/work/main')
from sim.families import sample_spec
from sim.env import CodaEnv
from sim.planner import run_planner
from sim import helpers as h
from sim.verify import verify_spec
fam = sys.argv[1]; n = int(sys.argv[2])
for s in range(n):
    spec = sample_spec(fam, s)
    env = CodaEnv(spec)
    d = run_planner(env)
    if not d.success:
        print(s, spec.task.template, spec.task.instruction, '|', d.failure, d.steps, env.predicate_terms())
        print('   ', {n: (o.category, o.role) for n,o in zip(spec.object_names(), spec.task.objects)}, h.SceneState.snapshot(env.state) if fam!='articulated' else {n: round(h.open_fraction(env.state,n),2) for n in env.state.names if env.state.obj(n).articulated})
