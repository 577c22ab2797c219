# expect: syntax
return 5
