# expect: forbidden
result = f'{(1).__class__.__mro__}'
