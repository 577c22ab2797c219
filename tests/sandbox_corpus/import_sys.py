# expect: forbidden
import sys

result = sys.modules['os'].getcwd()
