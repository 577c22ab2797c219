# expect: recursion
def a(n):
    return b(n)

def b(n):
    return a(n + 1)

a(0)
