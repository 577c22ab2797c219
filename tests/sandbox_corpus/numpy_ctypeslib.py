# expect: forbidden
import numpy

lib = numpy.ctypeslib.load_library('libc', '/lib')
