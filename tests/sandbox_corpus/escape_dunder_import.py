# expect: forbidden
__import__('os').system('touch ' + marker)
