# expect: forbidden
breakpoint()
