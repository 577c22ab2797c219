# expect: recursion
x = []
for _ in range(100_000):
    x = [x]
result = x
