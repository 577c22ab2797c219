# expect: memory
x = [0] * 10**10
