# expect: forbidden
# The plain spellings of numpy's memory views: as_strided through numpy.lib, the array interface, ctypes pointers.
# The static check refuses them before anything runs.
import numpy as np
from numpy.lib.stride_tricks import as_strided

leak = as_strided(np.zeros(1), shape=(1 << 20,), strides=(8,))
address = np.zeros(1).__array_interface__['data'][0]
raw = np.zeros(1).ctypes.data_as(np.ctypeslib.ndpointer(np.uint8))
raise RuntimeError(repr(leak[1:64].tolist()) + repr(address) + repr(raw))
