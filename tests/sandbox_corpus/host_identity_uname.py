# expect: runtime
# The host's identity: a format string built at run time walks from an SDK class to the `platform` module's cached
# uname (the zygote filled it before forking), and an error message carries it out. The zygote renames the node of
# its UTS namespace and blanks the kernel's release and version first, and children cannot call `uname` themselves.
import sim

u = "_" * 2
walk = "{0." + u + "init" + u + "." + u + "globals" + u + "[_scene].sys.modules[platform]._uname_cache}"
raise RuntimeError("host: " + walk.format(sim.Scene))
