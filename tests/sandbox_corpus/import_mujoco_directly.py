# expect: forbidden
import mujoco

result = mujoco.__version__
