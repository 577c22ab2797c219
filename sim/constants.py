"""Shared constants of the simulator SDK: control rates, action layout, observation layout, roles.

Every other package reads these names instead of repeating numbers.
"""

from __future__ import annotations

from typing import Literal, get_args

# --- physics and control -------------------------------------------------------------------
TIMESTEP = 0.002
"""physics timestep in seconds"""
SUBSTEPS = 50
"""physics steps per control step (10 Hz control)"""
CONTROL_HZ = 1.0 / (TIMESTEP * SUBSTEPS)
CHUNK = 8
"""control steps per action chunk (h)"""

# --- action: 7-D end-effector delta ---------------------------------------------------------
ACTION_DIM = 7
"""[dx, dy, dz] metres, [rx, ry, rz] axis-angle radians (world frame), gripper in [-1, 1] (-1 open, +1 closed)"""
MAX_DPOS = 0.05
"""largest accepted position delta per control step, metres per axis (larger values are clipped)"""
MAX_DROT = 0.25
"""largest accepted rotation delta per control step, radians (norm; larger values are clipped)"""

# --- workspace ------------------------------------------------------------------------------
TABLE_Z = 0.0
"""height of the table surface (the world plane named 'table')"""
WORKSPACE_LOW = (0.20, -0.40, 0.0)
WORKSPACE_HIGH = (0.90, 0.40, 0.60)
"""gripper target positions are clipped to this box (metres, world frame)"""
GRIPPER_HOME = (0.45, 0.0, 0.30)

# --- robots ---------------------------------------------------------------------------------
Robot = Literal["gripper", "panda"]
ROBOTS: tuple[str, ...] = get_args(Robot)
"""embodiments a scene can name (`Scene(..., robot=)`): the floating parallel-jaw gripper, the Franka Panda"""
DEFAULT_ROBOT = "gripper"

# --- roles ----------------------------------------------------------------------------------
ROLES = (
    "target",
    "receptacle",
    "support",
    "occluder",
    "distractor",
    "articulated",
    "handle",
    "tool",
)
"""symbolic roles an object can play in a task; the order fixes the one-hot layout in observations"""

FACTORS = ("task", "layout", "attributes")
"""scene factors: τ task, σ layout (object-spatial), α attributes"""

DIAGNOSIS_FACTORS = ("task", "spatial", "attribute", "execution")
"""δ of a failure diagnosis"""
ModeKey = Literal["factor_phase", "factor"]
"""what a diagnosis must share with a difficulty mode to join it: its (factor, phase), or its factor alone"""
MODE_KEYS: tuple[str, ...] = get_args(ModeKey)
DEFAULT_MODE_KEY = "factor"
"""the factor alone: mode key v1 (experiments/modekey_v1) raised targeting precision 2.4–4.5× and critic consistency
to 0.89 at no measured cost in-distribution"""

SCENE_FACTOR_OF = {"task": "task", "spatial": "layout", "attribute": "attributes", "execution": "layout"}
"""diagnosis factor δ -> the scene factor a variant of the failing scene redraws (execution failures: the layout)"""

FamilyName = Literal["pick_place", "stack", "articulated", "prep"]
"""a task family (the type of tool arguments and schema fields)"""
FAMILIES: tuple[str, ...] = get_args(FamilyName)

SuiteName = Literal["in", "instances", "layouts", "tasks", "categories"]
"""an evaluation suite: in-distribution ("in") or one of the held-out (OOD) suites"""
SUITES: tuple[str, ...] = get_args(SuiteName)
OOD_SUITES = SUITES[1:]
"""held-out evaluation suites"""
EvalSuiteName = Literal["in", "instances", "layouts", "tasks", "categories", "seed"]
"""a suite that can be evaluated on request: SUITES plus "seed" (held-out scenes of the base's seed distribution)"""
Distribution = Literal["train", "seed"]
"""what a base policy is trained on: the whole train side, or its narrow seed distribution (sim.assets.SEED_*)"""
DISTRIBUTIONS: tuple[str, ...] = get_args(Distribution)

# --- curriculum: success band and budget shares ------------------------------------------------------
SUCCESS_BAND = (0.1, 0.9)
"""success band: a mode (or a generation program, or a scene for success-guided generation) is worth generating for
while its success rate is inside [lo, hi]; the compiler routes a mode below it to BC and inside it to shaped AWR"""
EPS_NOVEL = 0.15
"""share of a round's generation budget for novel environments (ε_novel)"""
EPS_REPLAY = 0.10
"""share of a round's generation budget for replay of seen modes (ε_replay)"""

# --- success predicates ----------------------------------------------------------------------
MAX_PREDICATE_ATOMS = 64
"""most atoms in a task's success predicate (the built-in families use at most 6)"""
MAX_PREDICATE_DEPTH = 8
"""deepest nesting of a success predicate, an atom alone being depth 1 (the built-in families reach 3)"""
MAX_PREDICATE_NODES = 256
"""most nodes (atoms and and/or/not connectives) in a success predicate"""

# --- observation layout ---------------------------------------------------------------------
MAX_OBJECTS = 10
"""object tokens per observation (padded, see OBS_OBJECT_MASK)"""
OBJ_FEATURES = (
    ("pos", 3),
    ("quat", 4),
    ("linvel", 3),
    ("angvel", 3),
    ("half_size", 3),
    ("rel_gripper", 3),
    ("opening", 1),
    ("articulated", 1),
    ("role", len(ROLES)),
)
OBJ_DIM = sum(n for _, n in OBJ_FEATURES)
PROPRIO_FEATURES = (("pos", 3), ("quat", 4), ("linvel", 3), ("finger_opening", 1), ("gripper_cmd", 1))
PROPRIO_DIM = sum(n for _, n in PROPRIO_FEATURES)

OBS_OBJECTS = "objects"
"""float32 (MAX_OBJECTS, OBJ_DIM)"""
OBS_OBJECT_MASK = "object_mask"
"""bool (MAX_OBJECTS,) true for real objects"""
OBS_OBJECT_CATEGORY = "object_category"
"""int64 (MAX_OBJECTS,) category index in the asset pool, -1 for padding"""
OBS_PROPRIO = "proprio"
"""float32 (PROPRIO_DIM,)"""
OBS_INSTRUCTION = "instruction"
"""str: the task instruction"""

PhaseName = Literal["approach", "grasp", "lift", "transport", "place", "release", "open", "close", "other"]
"""a trajectory phase (the type of tool arguments and schema fields)"""
PHASES: tuple[str, ...] = get_args(PhaseName)
"""trajectory phases used by rollout evidence, diagnoses and training programs"""
