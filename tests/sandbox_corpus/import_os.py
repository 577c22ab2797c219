# expect: forbidden
import os

os.system('touch ' + marker)
