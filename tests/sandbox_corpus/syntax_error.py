# expect: syntax
def broken(:
    return 1
