# expect: forbidden
import sim.sandbox_worker

result = 1
