# expect: memory
import numpy as np

result = float(np.ones(10**11).sum())
