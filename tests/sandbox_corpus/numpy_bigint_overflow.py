# expect: runtime
# message: int64
# Integers beyond int64 through the numpy facade: numpy would fall back to an object array of Python ints (a
# live numpy object holding arbitrary Python objects); the facade refuses them.
import numpy as np

scene = [np.array([2 ** 200]), np.power(10, 400)]
