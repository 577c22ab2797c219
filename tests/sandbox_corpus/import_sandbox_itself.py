# expect: forbidden

result = 1
