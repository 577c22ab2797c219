# expect: runtime
# message: lists of numbers
# A list that contains itself, handed to the numpy facade: numpy would build an object array (or recurse); the
# facade accepts only (nested) lists of numbers.
import numpy as np

x = [1.0]
x.append(x)
scene = np.array(x)
