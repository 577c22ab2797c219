# expect: forbidden
result = open('/etc/passwd').read()
