# FAULT: the program imports os (verifier: executes / forbidden).
import os

from sim import Scene

scene = Scene(family="pick_place", seed=seed)
os.system("echo escaped")
