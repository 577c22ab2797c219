# expect: forbidden
result = input('password? ')
