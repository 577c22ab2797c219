# expect: runtime
raise SystemExit(0)
