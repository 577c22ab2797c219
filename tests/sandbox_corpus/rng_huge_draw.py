# expect: memory
# The scene's RNG facade asked for 10**12 draws at once: the address-space limit stops it (the child dies alone,
# the zygote and the server go on).
from sim import Scene

scene = Scene(family="pick_place", seed=seed)
draws = scene.rng.random(size=(10 ** 6, 10 ** 6))
