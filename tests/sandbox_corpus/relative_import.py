# expect: forbidden
from . import sandbox

result = 1
