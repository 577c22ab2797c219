# expect: forbidden
exec("import os; os.system('touch ' + marker)")
