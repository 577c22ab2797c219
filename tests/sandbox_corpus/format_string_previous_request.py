# expect: runtime
# No escape needed: the child is forked from the zygote's request loop, whose frame still holds the previous
# request (another caller's program and inputs) and the previous answer (its result or scene spec). A format string
# assembled at run time reads them from the frames above the program.
u = '_' * 2
try:
    [][1]
except IndexError as exc:
    probe = exc

frame = '{0.' + u + 'traceback' + u + '.tb_frame'
names, found = [], {}
for depth in range(1, 8):
    try:
        names.append((frame + '.f_back' * depth + '.f_code.co_name}').format(probe))
    except Exception:
        names.append('?')
for depth, name in enumerate(names, 1):
    if name in ('_serve', 'handle_request'):
        for key in ('response', 'body', 'request'):
            try:
                text = (frame + '.f_back' * depth + '.f_locals[' + key + ']}').format(probe)
                found[name + '.' + key] = 'this request' if 'forked from the zygote' in text else text[:150]
            except Exception as exc:
                found[name + '.' + key] = 'no: ' + repr(exc)[:40]
raise RuntimeError('previous request: ' + repr(found) + ' frames=' + repr(names))
