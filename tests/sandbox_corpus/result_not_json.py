# expect: runtime
result = {1, 2, 3}
