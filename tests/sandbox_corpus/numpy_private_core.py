# expect: forbidden
import numpy as np

result = np._core.multiarray.__file__
