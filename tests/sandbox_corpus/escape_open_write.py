# expect: forbidden
with open(marker, 'w') as fh:
    fh.write('escaped')
