# expect: forbidden
# dataclass() writes the source of __repr__/__init__ from the field names and exec()s it with fresh globals (the
# real builtins). A class made with type(name, bases, {'__annotations__': {crafted_key: int}}) puts code into that
# source. Needs the real `type`: type(int), type(a class), a metaclass callable, the class of a pydantic model...
import sim

got = {}


def attempt(label, step):
    try:
        value = step()
    except BaseException as exc:
        got[label] = 'no ' + repr(exc)[:60]
        return None
    got[label] = 'GOT ' + repr(value)[:50]
    return value


# a class factory: the metaclass of any class is the real `type` (or a subclass of it)
factory = None
for label, step in (('type(int)', lambda: type(int)), ('type(Scene)', lambda: type(sim.Scene)),
                    ('type(type(0))', lambda: type(type(0))), ('type(ValueError)', lambda: type(ValueError)),
                    ('type(SceneSpec)', lambda: type(sim.SceneSpec)), ('type(object)', lambda: type(object))):
    factory = factory or attempt(label, step)

# a metaclass callable receives the class namespace, annotations included: craft the key there
captured = []


def grab(name, bases, namespace):
    captured.append(namespace)
    return namespace


class Grabbed(metaclass=grab):
    field: int = 0


got['namespace via metaclass'] = 'GOT keys ' + repr(sorted(captured[0])) if captured else 'no'

# dataclass itself, from the SDK's modules
dataclass = None
for label, step in (('sim.scene.dataclass', lambda: sim.scene.dataclass), ('sim.compile.dataclass', lambda: sim.compile.dataclass),
                    ('sim.program dataclass', lambda: sim.program.dataclass)):
    dataclass = dataclass or attempt(label, step)

crafted = 'a"+"""+str(' + "__import__('os').mkdir(" + repr(marker) + '))+"'
if factory is not None and dataclass is not None:
    Evil = attempt('crafted class', lambda: factory('Evil', (), {'x': 0, 'y': 1, '__annotations__': {crafted: int}}))
    attempt('dataclass(crafted)', lambda: dataclass(Evil, init=False, eq=False))
    attempt('generated repr runs', lambda: repr(Evil()))
if captured and dataclass is not None:
    captured[0]['__annotations__'][crafted] = int
    attempt('dataclass(namespace)', lambda: dataclass(captured[0], init=False, eq=False))
if dataclass is not None:
    @dataclass
    class Plain:
        a: int = 0

    attempt('plain dataclass repr', lambda: repr(Plain()))
raise RuntimeError('dataclass exec: ' + repr(sorted(got.items(), key=lambda item: not item[1].startswith('GOT'))))
