# expect: runtime
result = {'mass': float('nan')}
