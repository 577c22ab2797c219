# expect: forbidden
import numpy as np

result = np.load('/etc/passwd', allow_pickle=True)
