# expect: runtime
# An articulated scene that looks valid, whose initial joint state is not a number: NaN and infinities spelled as
# float('nan'), math.inf, 1e999, numpy's nan, the strings 'NaN' / 'Infinity' / '-inf' (pydantic parses those into
# floats), a huge int. Whatever set_task accepts, the NaN spelling is left for the verifier.
import math

import numpy as np
from sim import Scene, open_fraction, place

scene = Scene(family="articulated", seed=seed)
drawer = scene.add_object("drawer", role="articulated")
scene.add_object("lemon", role="distractor")
scene.set_layout(place(drawer))
scene.set_attributes(drawer, damping=0.5)
outcome = {}
for label, value in (('inf', float('inf')), ('-math.inf', -math.inf), ('1e999', 1e999), ('np.nan', np.nan),
                     ("'NaN'", 'NaN'), ("'Infinity'", 'Infinity'), ("'-inf'", '-inf'), ('10**400', 10 ** 400)):
    try:
        scene.set_task("open the drawer", success=open_fraction(drawer, min=0.6),
                       initial_state={'drawer': {'open': value}})
        outcome[label] = 'accepted by set_task'
    except Exception as exc:
        outcome[label] = 'refused: ' + str(exc)[:60]
scene.meta = {'outcome': outcome}
scene.set_task("open the drawer", success=open_fraction(drawer, min=0.6),
               initial_state={drawer: {'open': float('nan')}})
