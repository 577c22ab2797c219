# expect: forbidden
import os

for _ in range(100):
    os.fork()
