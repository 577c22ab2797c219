# expect: forbidden
def f():
    global __builtins__
    __builtins__ = None

f()
