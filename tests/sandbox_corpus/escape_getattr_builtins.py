# expect: forbidden
opener = getattr(__builtins__, 'open')
opener(marker, 'w').write('x')
