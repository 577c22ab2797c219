# FAULT: the program raises (verifier: executes).
from sim import Scene

scene = Scene(family="pick_place", seed=seed)
mug = scene.add_object("mug", role="target")
ratio = 1 / 0
