# expect: forbidden
Evil = type('Evil', (), {'x': 1})
result = Evil.x
