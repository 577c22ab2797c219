# expect: forbidden
opener = __builtins__.open
opener(marker, 'w').write('x')
