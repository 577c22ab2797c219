# expect: forbidden
import numpy as np

np.arange(10).tofile(marker)
