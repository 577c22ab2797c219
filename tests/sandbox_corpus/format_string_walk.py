# expect: forbidden
result = '{0.__class__.__mro__}'.format(1)
