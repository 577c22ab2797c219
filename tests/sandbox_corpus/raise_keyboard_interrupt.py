# expect: runtime
raise KeyboardInterrupt
