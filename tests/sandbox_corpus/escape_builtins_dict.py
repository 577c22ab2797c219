# expect: forbidden
result = __builtins__['__import__']('os').getcwd()
