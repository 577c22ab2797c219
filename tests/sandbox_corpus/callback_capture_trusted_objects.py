# expect: runtime
# Get live trusted objects without any attribute trick: hand the SDK objects whose special methods (__eq__,
# __hash__, __lt__, __len__, __getitem__, __iter__, __call__, __str__, __repr__, __contains__) record what the
# trusted code passes them (a comparison with an internal model, an index into an array...), and a `name` that the
# SDK reads. Anything but plain data or SDK values that reaches them is a leak.
import numpy as np
import sim
from sim import Scene, near, on, place

seen = []


class Spy:
    def __init__(self, name='spy'):
        self.name = name

    def __eq__(self, other):
        seen.append(other)
        return False

    def __hash__(self):
        return 7

    def __lt__(self, other):
        seen.append(other)
        return False

    def __len__(self):
        return 1

    def __getitem__(self, index):
        seen.append(index)
        if index != 0:
            raise IndexError(index)
        return 1.0

    def __iter__(self):
        return iter([1.0])

    def __call__(self, *args, **kwargs):
        seen.extend(args)
        seen.extend(kwargs.values())
        return 0

    def __str__(self):
        return 'mug'

    def __repr__(self):
        return 'Spy'

    def __contains__(self, item):
        seen.append(item)
        return False


def attempt(step):
    try:
        step()
    except Exception:
        pass


scene = Scene(family='pick_place', seed=seed)
mug = scene.add_object('mug', role='target')
bowl = scene.add_object('bowl', role='receptacle')
attempt(lambda: scene.add_object(Spy(), role=Spy(), name=Spy()))
attempt(lambda: scene.set_layout(place(Spy(), on=Spy(), xy=Spy(), near=Spy(), gap=Spy(), yaw=Spy())))
attempt(lambda: scene.set_attributes(Spy('mug'), mass=Spy(), rgba=Spy(), asset=Spy()))
attempt(lambda: scene.set_attributes(mug, rgba=Spy(), scale=Spy(), joint_range=Spy()))
attempt(lambda: scene.set_task('x', success=on(Spy(), bowl) & near(mug, bowl, dist=Spy())))
attempt(lambda: scene.rng.choice([Spy(), Spy()], p=Spy()))
attempt(lambda: scene.rng.shuffle([Spy(), 1]))
attempt(lambda: scene.rng.integers(Spy(), Spy(), size=Spy()))
attempt(lambda: np.array([Spy()]))
attempt(lambda: np.interp(Spy(), Spy(), Spy()))
attempt(lambda: sim.Vec([1.0]) + Spy())
attempt(lambda: sim.Vec([1.0]) == Spy())
attempt(lambda: mug == Spy())
attempt(lambda: sim.helpers.position(Spy(), 'mug'))
plain = (str, int, float, bool, type(None), sim.Vec, type(mug))
trusted = [repr(type(x)) for x in seen if not isinstance(x, plain)]
raise RuntimeError('callbacks saw %d values; not plain data: %r; kinds: %r'
                   % (len(seen), trusted, sorted({repr(type(x)) for x in seen})))
