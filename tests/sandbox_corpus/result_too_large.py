# expect: output
result = 'x' * 6_000_000
