# expect: timeout
import numpy as np

x = np.zeros(1000)
while True:
    x = np.sin(x) + 1.0
