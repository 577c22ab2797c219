# expect: forbidden
def gen():
    yield 1

g = gen()
result = g.gi_frame.f_back.f_globals
