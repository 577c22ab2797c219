# expect: forbidden
import multiprocessing

while True:
    multiprocessing.Process(target=print).start()
