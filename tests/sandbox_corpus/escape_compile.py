# expect: forbidden
code = compile('1', 'x', 'eval')
