# expect: forbidden
# Structural pattern matching reads attributes by name: `case Scene(_builder=b)` would bind the trusted builder
# kept in a private slot, without any attribute expression for the static check to see. Keyword patterns are
# checked like attributes.
from sim import Scene

scene = Scene(family="pick_place", seed=seed)
match scene:
    case Scene(_builder=builder):
        leaked = builder
