# FAULT: the program never ends (verifier: executes / timeout).
from sim import Scene

scene = Scene(family="pick_place", seed=seed)
while True:
    seed += 1
