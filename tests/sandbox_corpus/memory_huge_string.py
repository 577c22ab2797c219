# expect: memory
s = 'a' * 10**10
result = len(s)
