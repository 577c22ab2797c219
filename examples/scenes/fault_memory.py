# FAULT: the program allocates without bound (verifier: executes / memory).
from sim import Scene

scene = Scene(family="pick_place", seed=seed)
blocks = []
while True:
    blocks.append(bytearray(50_000_000))
