# FAULT: the program imports subprocess (verifier: executes / forbidden).
import subprocess

from sim import Scene

scene = Scene(family="pick_place", seed=seed)
subprocess.run(["echo", "escaped"])
