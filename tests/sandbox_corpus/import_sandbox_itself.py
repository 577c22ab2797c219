# expect: forbidden
import sim.sandbox.worker

result = 1
