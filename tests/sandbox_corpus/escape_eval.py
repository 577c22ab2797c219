# expect: forbidden
result = eval('1 + 1')
