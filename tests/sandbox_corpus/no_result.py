# expect: runtime
x = 42
