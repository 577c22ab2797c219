# expect: timeout
while True:
    print('x' * 100_000)
