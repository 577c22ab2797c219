# expect: forbidden
import numpy.lib.format as fmt

result = fmt.read_magic
