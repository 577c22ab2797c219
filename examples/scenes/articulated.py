# Open the drawer (articulated).
from sim import Scene, open_fraction, place

scene = Scene(family="articulated", seed=seed)
drawer = scene.add_object("drawer", role="articulated")
scene.add_object("lemon", role="distractor")
scene.set_task("open the drawer", success=open_fraction(drawer, min=0.6))
scene.set_layout(place(drawer))
scene.set_attributes(drawer, damping=0.5)
