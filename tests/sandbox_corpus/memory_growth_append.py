# expect: memory
x = []
while True:
    x.append(bytearray(10**6))
