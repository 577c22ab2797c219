# expect: recursion
def f(n):
    return f(n + 1) + 1

result = f(0)
