"""Red-team follow-up to test_os_isolation.py: raw syscalls an escaped program (real builtins, ctypes) could try
beyond the open/socket/fork/kill/ptrace set there — kernel attack surface (io_uring, bpf, userfaultfd, perf),
namespace and privilege changes, signals by other routes, descriptor tricks, and the x32 ABI. Each must fail
(EPERM/EACCES from the seccomp allow-list) or kill the child (foreign ABI), and the pool must go on answering."""

from __future__ import annotations

import pytest

from sim.sandbox import SandboxLimits, SandboxPool
from sim.sandbox import isolation as sandbox_os

CAPS = sandbox_os.capabilities()
pytestmark = pytest.mark.skipif(not CAPS["seccomp"], reason=f"no seccomp here: {CAPS['reasons'].get('seccomp')}")
LIMITS = SandboxLimits(timeout_s=3.0, cpu_s=4)

# name -> x86_64 syscall number and arguments (ints; "buf" is a writable 256-byte buffer, "path" a C string)
SYSCALLS = {
    "openat2": (437, -100, "path", 0, 0),
    "open_by_handle_at": (304, 3, 0, 0),
    "name_to_handle_at": (303, -100, "path", 0, 0, 0),
    "io_uring_setup": (425, 8, "buf"),
    "memfd_create": (319, "path", 0),
    "userfaultfd": (323, 0),
    "bpf": (321, 0, 0, 0),
    "perf_event_open": (298, 0, 0, -1, -1, 0),
    "keyctl": (250, 0, 0),
    "unshare (new user namespace)": (272, 0x10000000),
    "setns": (308, 3, 0),
    "mount": (165, 0, 0, 0, 0, 0),
    "prctl(PR_SET_DUMPABLE, 1)": (157, 4, 1, 0, 0, 0),
    "seccomp (replace the filter)": (317, 0, 0, 0),
    "clone3": (435, 0, 0),
    "vfork": (58,),
    "tgkill the zygote": (234, 1, 1, 0),
    "rt_sigqueueinfo to the zygote": (129, 1, 10, "buf"),
    "kill(-1) every process": (62, -1, 0),
    "process_madvise": (440, 0, 0, 0, 0, 0),
    "pidfd_getfd": (438, 0, 0, 0),
    "kcmp": (312, 1, 1, 0, 0, 0),
    "splice the request pipe into the answer": (275, 4, 0, 3, 0, 10, 0),
    "tee": (276, 4, 3, 10, 0),
    "vmsplice": (278, 3, 0, 0, 0),
    "sendfile": (40, 3, 4, 0, 10),
    "pwrite64 on the answer pipe": (18, 3, "buf", 1, 0),
    "fcntl on the answer pipe": (72, 3, 4, 0),
    "ioctl": (16, 3, 0x5401, 0),
    "personality(READ_IMPLIES_EXEC)": (135, 0x0400000),
    "mmap PROT_EXEC with high bits set": (9, 0, 4096, 7 | (1 << 40), 0x22, -1, 0),
    "chdir ..": (80, "path"),
    "getdents64": (217, 0, "buf", 256),
    "pipe": (22, "buf"),
    "eventfd": (284, 0),
    "setuid(0)": (105, 0),
    "setpgid (leave the killed group)": (109, 0, 0),
    "setpriority": (141, 0, 0, -20),
    "modify_ldt": (154, 0, 0, 0),
    "shmget": (29, 0, 4096, 0o1000),
    "msgget": (68, 0, 0o1000),
    "syslog": (103, 3, "buf", 256),
    "getppid": (110,),
    "uname": (63, "buf"),  # the kernel's release and version are the host's
    "sysinfo": (99, "buf"),
}

PROBE = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
out = {}
for name, (nr, *args) in SYSCALLS.items():
    argv = []
    for a in args:
        if a == "path":
            argv.append(ctypes.c_char_p(b"/etc/hostname" if nr != 80 else b".."))
        elif a == "buf":
            argv.append(ctypes.create_string_buffer(256))
        else:
            argv.append(ctypes.c_long(a))
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *argv)
    out[name] = [r, ctypes.get_errno()]
result = out
"""


@pytest.fixture(scope="module")
def pool():
    with SandboxPool(size=1, limits=LIMITS, preload=("numpy",)) as p:
        yield p


def test_raw_syscalls_beyond_the_allow_list_fail(pool):
    res = pool.run_unguarded(PROBE, inputs={"globals": {"SYSCALLS": SYSCALLS}})
    assert res.ok, res.error
    allowed = {name: rc for name, rc in res.value.items() if rc[0] != -1 or rc[1] not in (1, 13)}  # EPERM, EACCES
    assert not allowed, allowed
    assert set(res.value) == set(SYSCALLS)
    assert pool.run("result = 6 * 7").value == 42


@pytest.mark.parametrize("nr", [39, 2, 41], ids=["x32 getpid", "x32 open", "x32 socket"])
def test_x32_abi_syscalls_kill_the_child(pool, nr):
    source = ("import ctypes\nlibc = ctypes.CDLL(None)\nlibc.syscall.restype = ctypes.c_long\n"
              f"libc.syscall(ctypes.c_long(0x40000000 | {nr}), ctypes.c_char_p(b'/etc/hostname'), 0, 0)\n"
              "result = 'survived'")
    res = pool.run_unguarded(source)
    assert not res.ok and res.error.kind == "crash" and "SIGSYS" in res.error.message, res
    assert pool.run("result = 'alive'").value == "alive"


def test_reusing_the_answer_descriptor_slot_reaches_nothing(pool):
    # close the answer pipe and dup another descriptor into slot 3: the filter allows writes to fd 3, but the only
    # descriptors left are /dev/null and the child's own request pipe, so nothing leaves the child and the run
    # ends as a timeout (no answer) rather than as a forged one
    source = ("import os\nos.close(3)\nfd = os.dup(0)\nassert fd == 3\n"
              "os.write(3, b'\\x00' * 16 + b'{\"ok\": true, \"value\": \"forged\"}')\nresult = 'mine'")
    res = pool.run_unguarded(source, limits=SandboxLimits(timeout_s=1.0, cpu_s=2))
    assert not res.ok and res.error.kind in ("timeout", "crash"), res
    assert res.value != "forged"
    assert [pool.run("result = seed", inputs={"globals": {"seed": i}}).value for i in range(2)] == [0, 1]
