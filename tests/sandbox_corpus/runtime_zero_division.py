# expect: runtime
a = 1
b = 0
result = a / b
