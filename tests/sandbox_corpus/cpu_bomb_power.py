# expect: timeout
result = 10 ** 10 ** 10
