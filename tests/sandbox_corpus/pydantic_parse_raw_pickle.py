# expect: runtime
# pydantic's model methods, reached from every pydantic object the SDK hands out (sim.SceneSpec, a predicate, a
# built spec): parse_raw with a pickle (allow_pickle=True) whose REDUCE calls the real eval, parse_file on
# secrets, model_validate / construct / model_construct with crafted values, model_rebuild with a namespace.
import math

import sim

got = {}
pickles = [
    # builtins.eval(<expression>) -> stash the real builtins where the program can read them (math.stash)
    b"cbuiltins\neval\n(V__import__('sys').modules['math'].__dict__.__setitem__('stash', __builtins__)\ntR.",
    # os.system via the pickle's own import machinery
    b"cposix\nsystem\n(Vid\ntR.",
    b"\x80\x04\x95\x00\x00\x00\x00\x00\x00\x00\x00\x8c\x08builtins\x8c\x04exec\x93\x8c\x06x = 1\x85R.",
]
holders = {
    'sim.SceneSpec': lambda: sim.SceneSpec,
    'predicate': lambda: type(sim.inside('mug', 'bowl') & sim.grasped('mug')),
    'atom': lambda: type(sim.on('mug', 'bowl')),
    'built spec': lambda: type(sim.Scene('pick_place').spec()),
}


def attempt(label, step):
    try:
        got[label] = 'GOT ' + repr(step())[:50]
    except BaseException as exc:
        got[label] = 'no ' + repr(exc)[:60]


for name, holder in holders.items():
    attempt(name + ' class', holder)
    for i, data in enumerate(pickles):
        attempt(name + ' parse_raw %d' % i, lambda: holder().parse_raw(data, content_type='application/pickle',
                                                                         allow_pickle=True))
    attempt(name + ' parse_obj', lambda: holder().parse_obj({'op': 'on', 'args': ['a', 'b']}))
    attempt(name + ' parse_file', lambda: holder().parse_file('/proc/1/environ', content_type='application/pickle',
                                                              allow_pickle=True))
    attempt(name + ' model_validate', lambda: holder().model_validate({'op': 'on', 'args': ['a', 'b']}))
    attempt(name + ' model_validate_json', lambda: holder().model_validate_json(b'{"op": "on", "args": ["a", "b"]}'))
    attempt(name + ' construct', lambda: holder().construct(op='on', args=('a', 'b'), extra=print))
    attempt(name + ' model_construct', lambda: holder().model_construct(op='on', args=['a'], evil=math))
    attempt(name + ' model_rebuild', lambda: holder().model_rebuild(force=True, _types_namespace={'float': str}))
try:
    got['real builtins'] = 'GOT dict of %d' % len(math.stash)
except AttributeError:
    got['real builtins'] = 'none'
interesting = {k: v for k, v in got.items() if v.startswith('GOT') and 'class' not in k}
raise RuntimeError('pydantic methods: real builtins ' + got['real builtins'] + '; worked: ' + repr(interesting)[:300]
                   + ' all: ' + repr(got))
