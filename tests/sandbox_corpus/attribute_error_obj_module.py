# expect: forbidden
# A failed attribute lookup's AttributeError carries the object it ran on (`.obj`, CPython 3.10+): on a read-only
# module proxy that used to be the real module behind it (sim.program, math, the numpy facade, sim.helpers), which
# a program could then rebind. Each `.obj` must be what the program already had; a rebinding that succeeds is
# reported as a runtime error, a refused one ends the program as forbidden.
import math

import numpy as np
import sim
from sim import helpers


def obj_of(lookup):
    try:
        lookup()
    except AttributeError as e:
        return e.obj
    return None


rebound = []
for label, lookup in (('sim', lambda: sim.no_such_name), ('math', lambda: math.no_such_name),
                      ('numpy', lambda: np.no_such_name), ('sim.helpers', lambda: helpers.no_such_name),
                      ('np.linalg', lambda: np.linalg.no_such_name), ('np.random', lambda: np.random.no_such_name)):
    target = obj_of(lookup)
    try:
        target.pi = 3.0
        rebound.append(label)
    except Exception:
        pass
if rebound or math.pi != 3.141592653589793:
    raise RuntimeError('rebound the real modules behind %r; math.pi is now %r' % (rebound, math.pi))
math.pi = 3.0  # refused: the proxies are read-only
