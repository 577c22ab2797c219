"""A robosuite environment behind a pipe: the worker process of `policy.external.robosuite_tasks`.

Run by the adapter as `<external venv>/bin/python robosuite_worker.py`; it reads messages (`protocol.py`) on
stdin and answers each on stdout. robosuite runs unmodified: the worker makes the env with `robosuite.make`, steps
it through its own operational-space controller, reads poses from its MuJoCo model and data, and takes success
from the env's own `_check_success()`. It imports only robosuite, numpy and its sibling files (`control.py`,
`protocol.py`, `worker_common.py`: the message loop and model helpers it shares with the Meta-World worker), never
this project (which needs MuJoCo 4, while robosuite 1.5 needs MuJoCo 3).

Commands (dicts with "cmd"): make, reset, attrs, step, render, success, bench, close; each answer is a dict, {"error": "..."} on
failure. Anything robosuite prints goes to stderr: stdout carries only messages. Each state also says whether the
left finger, the right finger and the end effector touched each object's body subtree at any control step since
the previous state (`touch`, from MuJoCo's contact list), for the phase analysis (`phases.py`).
"""

from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
import control  # noqa: E402  (siblings, numpy only)
import worker_common  # noqa: E402

sys.path.remove(_HERE)  # so `import robosuite` below finds the package, not a file next to this one

import numpy as np  # noqa: E402


class Worker:
    def __init__(self):
        self.env = None

    # --- set-up -------------------------------------------------------------------------------------
    def make(self, msg: dict) -> dict:
        import mujoco
        import robosuite

        kwargs = dict(robots=msg.get("robots", "Panda"), has_renderer=False,
                      has_offscreen_renderer=bool(msg.get("render")), use_camera_obs=False, ignore_done=True,
                      horizon=int(msg.get("horizon", 100_000)))
        kwargs.update(msg.get("env_kwargs") or {})
        self.env = env = robosuite.make(msg["task"], **kwargs)
        self.mj = mujoco
        self.objects = list(msg.get("objects") or [])
        self.control = dict(msg["control"])
        self.camera = (msg.get("render") or {}).get("camera", "frontview")
        self.size = int((msg.get("render") or {}).get("size", 256))
        env.reset()
        self._bind()
        c = self.controller
        if c.input_type != "delta":
            raise ValueError(f"the arm controller takes {c.input_type!r} input; the adapter drives a delta OSC")
        info = {
            "robosuite": robosuite.__version__, "mujoco": mujoco.__version__,
            "control_freq": float(env.control_freq), "timestep": float(self.m.opt.timestep),
            "controller": type(c).__name__, "input_ref_frame": c.input_ref_frame,
            "output_max": np.asarray(c.output_max, dtype=np.float64), "input_max": np.asarray(c.input_max, float),
            "ref_mat": self._ref_mat(), "base_pos": np.asarray(c.origin_pos, dtype=np.float64),
            "action_dim": int(env.action_dim), "tcp_site": self.tcp_name,
            "finger_range": np.array([self.m.jnt_range[j] for j in self.finger_joints], dtype=np.float64),
            "gripper_speed": None if self.gripper_speed is None else float(self.gripper_speed),
            "objects": [self._static(o) for o in self.objects],
            "sites": {name: self.d.site_xpos[self._id("site", name)].copy() for name in msg.get("sites", [])
                      if self._id("site", name, missing=True) >= 0},
        }
        return {"info": info}

    def _id(self, kind: str, name: str, missing: bool = False) -> int:
        return worker_common.name_id(self.mj, self.m, kind, name, missing)

    def _bind(self) -> None:
        """Model indices; robosuite rebuilds its MjModel on a hard reset, so this runs after every reset."""
        env = self.env
        self.m, self.d = env.sim.model._model, env.sim.data._data
        robot = env.robots[0]
        arm = robot.arms[0]
        self.controller = robot.part_controllers[arm]
        gripper = robot.gripper[arm]
        self.gripper = gripper
        self.gripper_speed = getattr(gripper, "speed", None)
        """how far the gripper's command moves per control step (robosuite's PandaGripper: 0.2); None: at once"""
        self.tcp_name = gripper.important_sites["grip_site"]
        self.tcp = self._id("site", self.tcp_name)
        prefix = gripper.naming_prefix
        self.finger_joints = [self._id("joint", prefix + "finger_joint1"), self._id("joint", prefix + "finger_joint2")]
        self.finger_bodies = [self._id("body", prefix + "leftfinger"), self._id("body", prefix + "rightfinger")]
        self.hand_body = int(self.m.body_parentid[self._id("body", gripper.root_body)])
        self.obj_body = [self._id("body", o["body"]) for o in self.objects]
        self.obj_site = [self._id("site", o["site"]) if o.get("site") else -1 for o in self.objects]
        self.obj_free = [int(self.m.jnt_dofadr[self._id("joint", o["free_joint"])]) if o.get("free_joint") else -1
                         for o in self.objects]
        self.obj_joint = [int(self.m.jnt_qposadr[self._id("joint", o["joint"])]) if o.get("joint") else -1
                          for o in self.objects]
        self.obj_box = [self._box(o.get("bbox_body", o["body"])) for o in self.objects]
        # contact sets for the phase analysis: each finger's subtree, the whole end effector (the gripper's parent
        # body and all below it), each object's body subtree
        self.touch_bodies = [worker_common.subtree_bodies(self.m, b) for b in self.finger_bodies] + \
            [worker_common.subtree_bodies(self.m, self.hand_body)]
        self.obj_bodies = [worker_common.subtree_bodies(self.m, b) for b in self.obj_body]
        self._touched = np.zeros((len(self.objects), 3), dtype=bool)

    def _touch(self) -> np.ndarray:
        """(n_objects, 3): whether the left finger, the right finger, the end effector touches each object now."""
        m, d = self.m, self.d
        return np.array([[worker_common.touching(m, d, part, bodies) for part in self.touch_bodies]
                         for bodies in self.obj_bodies], dtype=bool).reshape(len(self.objects), 3)

    def _ref_mat(self) -> np.ndarray:
        c = self.controller
        if c.input_ref_frame == "world":
            return np.eye(3)
        return np.asarray(c.origin_ori, dtype=np.float64).reshape(3, 3)

    def _box(self, body: str):
        """Centre offset and half extents, in the body's frame, of the collision geoms of a body's subtree."""
        return worker_common.subtree_box(self.m, self.d, self._id("body", body))

    def _static(self, o: dict) -> dict:
        i = self.objects.index(o)
        out = {"name": o["name"], "center_offset": self.obj_box[i][0], "half_extent": self.obj_box[i][1]}
        if o.get("joint"):
            out["joint_range"] = np.asarray(self.m.jnt_range[self._id("joint", o["joint"])], dtype=np.float64)
        return out

    # --- episode ------------------------------------------------------------------------------------
    def reset(self, msg: dict) -> dict:
        seed = msg.get("seed")
        self.control.update(msg.get("control") or {})
        if seed is not None:
            # robosuite draws placements and the robot's start noise from env.rng (shared with its samplers, so it
            # is re-seeded in place) and object sizes on a hard reset from numpy's global generator
            self.env.rng.bit_generator.state = np.random.default_rng(int(seed)).bit_generator.state
            np.random.seed(int(seed) % (2**32))
        self.env.reset()
        self._bind()
        self._settle(int(self.control.get("settle", 0)))
        d = self.d
        R, p = d.site_xmat[self.tcp].reshape(3, 3), d.site_xpos[self.tcp]
        c = self.control
        low = np.array(c.get("low", [-np.inf] * 3), dtype=np.float64)
        high = np.array(c.get("high", [np.inf] * 3), dtype=np.float64)
        self.tracker = control.TargetTracker(p, R, c["max_dpos"], c["max_drot"], c["leash"], low, high,
                                              c.get("rot_leash"))
        geometry = {"hand": (d.xpos[self.hand_body] - p) @ R,
                    "left_finger": (d.xpos[self.finger_bodies[0]] - p) @ R,
                    "right_finger": (d.xpos[self.finger_bodies[1]] - p) @ R}
        return {"state": self._state(), "geometry": geometry, "objects": [self._static(o) for o in self.objects]}

    def _settle(self, max_steps: int) -> None:
        """robosuite places its objects above the table (Lift's cube 1 cm up) and lets them drop once the episode
        runs; this project's scenes start at rest. With max_steps > 0, the arm holds still (a zero OSC delta: the
        goal is where it is) and the gripper as it is (robosuite's grippers move only on a non-zero command) for
        up to max_steps control steps, until every free object is at rest (speed < 1 cm/s, after at least one step),
        so the first observation shows the scene as it will stand."""
        d = self.d
        for k in range(max_steps):
            self.env.step(np.zeros(self.env.action_dim))
            speeds = [np.linalg.norm(d.qvel[a : a + 3]) for a in self.obj_free if a >= 0]
            if k >= 1 and max(speeds, default=0.0) < 0.01:
                break

    def _state(self) -> dict:
        m, d, mj = self.m, self.d, self.mj
        vel = np.zeros(6)
        mj.mj_objectVelocity(m, d, mj.mjtObj.mjOBJ_SITE, self.tcp, vel, 0)
        n = len(self.objects)
        pos, quat = np.zeros((n, 3)), np.zeros((n, 4))
        qvel, joint = np.zeros((n, 6)), np.full(n, np.nan)
        for i in range(n):
            b = self.obj_body[i]
            R = d.xmat[b].reshape(3, 3)
            pos[i] = d.site_xpos[self.obj_site[i]] if self.obj_site[i] >= 0 else d.xpos[b] + R @ self.obj_box[i][0]
            quat[i] = d.xquat[b]
            if self.obj_free[i] >= 0:
                qvel[i] = d.qvel[self.obj_free[i] : self.obj_free[i] + 6]
            if self.obj_joint[i] >= 0:
                joint[i] = d.qpos[self.obj_joint[i]]
        fingers = np.array([d.qpos[m.jnt_qposadr[j]] for j in self.finger_joints])
        touch = self._touch() | self._touched  # a contact at any control step since the last state counts
        self._touched = np.zeros_like(touch)
        return {"tcp_pos": d.site_xpos[self.tcp].copy(), "tcp_mat": d.site_xmat[self.tcp].reshape(3, 3).copy(),
                "tcp_linvel": vel[3:].copy(), "fingers": fingers, "obj_pos": pos, "obj_quat": quat,
                "obj_qvel": qvel, "obj_joint": joint, "touch": touch}

    def step(self, msg: dict) -> dict:
        env, c, d = self.env, self.control, self.d
        actions = np.asarray(msg["actions"], dtype=np.float64).reshape(-1, 7)
        k = int(c["steps_per_action"])
        ref, out_max = self._ref_mat(), np.asarray(self.controller.output_max, dtype=np.float64)
        in_max = np.asarray(self.controller.input_max, dtype=np.float64)
        states, successes, frames = [], [], []
        success, external = False, 0
        for a in actions:
            tcp = d.site_xpos[self.tcp].copy()
            grip = self.tracker.apply(a, tcp, d.site_xmat[self.tcp])
            open_loop = control.open_loop_delta(a, k, ref, out_max, c["max_dpos"], c["max_drot"])
            for _ in range(k):
                if c.get("action_map", "target") == "target":
                    cmd = control.osc_delta(self.tracker.pos, self.tracker.mat, d.site_xpos[self.tcp],
                                            d.site_xmat[self.tcp], ref, out_max, c.get("gain", 1.0))
                else:
                    cmd = open_loop
                sent = grip
                if c.get("gripper_map") == "opening" and self.gripper_speed is not None:
                    sent = control.gripper_toward(grip, float(np.ravel(self.gripper.current_action)[-1]),
                                                  float(self.gripper_speed), c["finger_open"], c["finger_squeeze"],
                                                  float(abs(np.diff(self.m.jnt_range[self.finger_joints[0]])[0])))
                env.step(np.concatenate([cmd * in_max, [sent]]))
                external += 1
                self._touched |= self._touch()
                success = bool(env._check_success())  # the benchmark's own success function
                if success:
                    break
            states.append(self._state())
            successes.append(success)
            if msg.get("render"):
                frames.append(self._render())
            if success and msg.get("stop_on_success", True):
                break
        keys = states[0].keys()
        return {"states": {k_: np.stack([s[k_] for s in states]) for k_ in keys},
                "success": np.array(successes, dtype=bool), "executed": len(states), "external_steps": external,
                "frames": np.stack(frames) if frames else None}

    def _render(self) -> np.ndarray:
        img = self.env.sim.render(width=self.size, height=self.size, camera_name=self.camera)
        return np.ascontiguousarray(img[::-1])  # MuJoCo's offscreen buffer is bottom-up

    def render(self, msg: dict) -> dict:
        return {"image": self._render()}

    def attrs(self, msg: dict) -> dict:
        out = {}
        for name in msg["names"]:
            v = getattr(self.env, name)
            out[name] = worker_common.plain(v)
        return {"attrs": out}

    def bench(self, msg: dict) -> dict:
        """robosuite alone: `n` env.step calls with a zero arm delta and an open gripper, timed here."""
        import time

        a = np.zeros(self.env.action_dim)
        a[-1] = -1.0
        t0 = time.perf_counter()
        for _ in range(int(msg.get("n", 200))):
            self.env.step(a)
        return {"seconds": time.perf_counter() - t0, "steps": int(msg.get("n", 200))}

    def success(self, msg: dict) -> dict:
        return {"success": bool(self.env._check_success())}


def main() -> int:
    return worker_common.serve(Worker(), ("make", "reset", "attrs", "step", "render", "success", "bench"))


if __name__ == "__main__":
    sys.exit(main())
