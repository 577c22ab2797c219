# expect: forbidden
import importlib

os = importlib.import_module('os')
os.system('touch ' + marker)
