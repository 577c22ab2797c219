# expect: forbidden
from os import system

system('touch ' + marker)
