"""A Meta-World environment behind a pipe: the worker process of `policy.external.metaworld_tasks`.

Run by the adapter as `<external venv>/bin/python metaworld_worker.py`; messages as `protocol.py`, the loop of
`worker_common.serve`. Meta-World runs unmodified: the worker makes the goal-observable env of a task
(`metaworld.env_dict.ALL_V3_ENVIRONMENTS_GOAL_OBSERVABLE`), steps it with its own 4-D action (mocap xyz delta
in [-1, 1] × `action_scale` metres, gripper effort in [-1 open, +1 closed]), reads poses from its MuJoCo model
and data, and takes success only from the `info["success"]` that `env.step` returns. It imports only metaworld,
mujoco, numpy and its sibling files, never this project (MuJoCo 4 there, 3.3 here).

Commands: make, reset, step (10 Hz actions through the target mapping, or `raw` 4-D Meta-World actions, one env
step each), expert (the action of a policy shipped in `metaworld.policies` for the current observation), render,
success, bench, close. Positions are in Meta-World's world frame: the adapter does the frame change. Each state
also says whether the left claw, the right claw (claw and pad) and the end effector (wrist and below) touched each
object's body subtree at any env step since the previous state (`touch`, from MuJoCo's contact list), for the
phase analysis (`phases.py`).
"""

from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
import control  # noqa: E402  (siblings, numpy only)
import worker_common  # noqa: E402

sys.path.remove(_HERE)  # so `import metaworld` below finds the package

import numpy as np  # noqa: E402


class Worker:
    def __init__(self):
        self.env = None
        self._renderer = None

    # --- set-up -------------------------------------------------------------------------------------
    def make(self, msg: dict) -> dict:
        import metaworld
        import mujoco
        from metaworld.env_dict import ALL_V3_ENVIRONMENTS_GOAL_OBSERVABLE as envs

        key = f"{msg['task']}-goal-observable"
        if key not in envs:
            raise KeyError(f"Meta-World {metaworld.__name__} has no task {msg['task']!r}")
        self.mj = mujoco
        self.env = env = envs[key](seed=int(msg.get("seed", 0)))
        self.m, self.d = env.model, env.data
        self.objects = list(msg.get("objects") or [])
        self.control = dict(msg["control"])
        render = msg.get("render") or {}
        self.camera, self.size = render.get("camera", "corner"), int(render.get("size", 256))
        self.turn = bool(render.get("turn", True))
        m = self.m
        self.fingers = [int(m.jnt_qposadr[self._id("joint", j)]) for j in ("r_close", "l_close")]
        self.finger_range = np.array([m.jnt_range[self._id("joint", j)] for j in ("r_close", "l_close")])
        self.hand = self._id("body", "hand")
        self.claws = [self._id("body", "leftclaw"), self._id("body", "rightclaw")]
        self.obj_body = [self._id("body", o["body"]) if o.get("body") else -1 for o in self.objects]
        self.obj_free = [int(m.jnt_dofadr[self._id("joint", o["free_joint"])]) if o.get("free_joint") else -1
                         for o in self.objects]
        self.obj_joint = [int(m.jnt_qposadr[self._id("joint", o["joint"])]) if o.get("joint") else -1
                          for o in self.objects]
        # contact sets for the phase analysis: each claw's subtree (claw and pad), the whole end effector (the
        # hand's parent, the wrist, and all below it), each object's body subtree
        wrist = int(m.body_parentid[self.hand])
        self.claw_bodies = [worker_common.subtree_bodies(m, c) for c in self.claws] + \
            [worker_common.subtree_bodies(m, wrist)]
        self.obj_bodies = [worker_common.subtree_bodies(m, b) if b >= 0 else set() for b in self.obj_body]
        self._reset(0)
        table = self._id("body", "tablelink")
        tops = [self.d.geom_xpos[g][2] + m.geom_size[g][2] for g in range(m.ngeom)
                if m.geom_bodyid[g] == table and m.geom_type[g] == mujoco.mjtGeom.mjGEOM_BOX]
        import importlib.metadata as md

        info = {
            "metaworld": md.version("metaworld"), "mujoco": mujoco.__version__,
            "control_freq": 1.0 / float(env.dt), "timestep": float(m.opt.timestep), "frame_skip": int(env.frame_skip),
            "action_scale": float(env.action_scale), "max_path_length": int(env.max_path_length),
            "mocap_low": np.asarray(env.mocap_low, dtype=np.float64),
            "mocap_high": np.asarray(env.mocap_high, dtype=np.float64),
            "base_pos": self.d.xpos[self._id("body", "right_arm_base_link")].copy(),
            "table_z": float(max(tops)) if tops else 0.0, "finger_range": self.finger_range,
            "cameras": [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_CAMERA, c) for c in range(m.ncam)],
        }
        return {"info": info}

    def _id(self, kind: str, name: str, missing: bool = False) -> int:
        return worker_common.name_id(self.mj, self.m, kind, name, missing)

    # --- episode ------------------------------------------------------------------------------------
    def _reset(self, seed: int | None) -> None:
        env = self.env
        if seed is not None:
            # a fresh random task vector (object and goal placement) from env.np_random, seeded here
            env._freeze_rand_vec = False
            env.seeded_rand_vec = True
            env.seed(int(seed))
        self.obs, _ = env.reset()
        self.info: dict = {"success": 0.0}
        self._touched = np.zeros((len(self.objects), 3), dtype=bool)

    def reset(self, msg: dict) -> dict:
        self.control.update(msg.get("control") or {})
        self._reset(msg.get("seed"))
        d, env = self.d, self.env
        self.mj.mj_forward(self.m, d)  # velocities of the state reset left (env.step ends with mj_forward too)
        tcp, R = self._tcp(), d.xmat[self.hand].reshape(3, 3).copy()
        self.offset = d.mocap_pos[0] - tcp  # mocap = tcp + offset (the weld's offset at rest)
        c = self.control
        self.tracker = control.TargetTracker(tcp, R, c["max_dpos"], c["max_drot"], c["leash"],
                                             env.mocap_low - self.offset, env.mocap_high - self.offset)
        geometry = {"hand": (d.xpos[self.hand] - tcp) @ R, "left_finger": (d.xpos[self.claws[0]] - tcp) @ R,
                    "right_finger": (d.xpos[self.claws[1]] - tcp) @ R}
        objects = []
        for i, o in enumerate(self.objects):
            if o.get("pos") == "goal":
                half = np.full(3, float(self.m.site_size[self._id("site", "goal")][0]))
            else:
                half = worker_common.subtree_box(self.m, d, self.obj_body[i])[1]
            info = {"name": o["name"], "half_extent": half}
            if o.get("joint"):
                info["joint_range"] = np.asarray(self.m.jnt_range[self._id("joint", o["joint"])], dtype=np.float64)
            objects.append(info)
        return {"state": self._state(), "geometry": geometry, "objects": objects}

    def _tcp(self) -> np.ndarray:
        return np.asarray(self.env.tcp_center, dtype=np.float64).copy()

    def _state(self) -> dict:
        m, d, mj, env = self.m, self.d, self.mj, self.env
        vel = np.zeros(6)
        mj.mj_objectVelocity(m, d, mj.mjtObj.mjOBJ_BODY, self.hand, vel, 0)
        n = len(self.objects)
        pos, quat = np.zeros((n, 3)), np.tile([1.0, 0, 0, 0], (n, 1))
        qvel, joint = np.zeros((n, 6)), np.full(n, np.nan)
        main = np.asarray(env._get_pos_objects(), dtype=np.float64)[:3]  # the env's own "object position"
        for i, o in enumerate(self.objects):
            b = self.obj_body[i]
            if o.get("pos") == "goal":
                pos[i] = env._target_pos
            elif o.get("pos") == "main":
                pos[i] = main
            else:
                pos[i] = d.xpos[b]
            if b >= 0:
                quat[i] = d.xquat[b]
            if self.obj_free[i] >= 0:
                qvel[i] = d.qvel[self.obj_free[i] : self.obj_free[i] + 6]
            if self.obj_joint[i] >= 0:
                joint[i] = d.qpos[self.obj_joint[i]]
        touch = self._touch() | self._touched  # a contact at any env step since the last state counts
        self._touched = np.zeros_like(touch)
        return {"tcp_pos": self._tcp(), "tcp_mat": d.xmat[self.hand].reshape(3, 3).copy(),
                "tcp_linvel": vel[3:].copy(), "fingers": np.array([d.qpos[a] for a in self.fingers]),
                "obj_pos": pos, "obj_quat": quat, "obj_qvel": qvel, "obj_joint": joint, "touch": touch}

    def _touch(self) -> np.ndarray:
        """(n_objects, 3): whether the left claw, the right claw (claw and pad), the end effector (wrist and below)
        touches each object's body subtree now."""
        m, d = self.m, self.d
        return np.array([[worker_common.touching(m, d, claw, bodies) for claw in self.claw_bodies]
                         for bodies in self.obj_bodies], dtype=bool).reshape(len(self.objects), 3)

    def _env_step(self, action) -> tuple[bool, bool]:
        """One Meta-World env.step; (success from its info, whether its episode limit is reached)."""
        self.obs, _, _, truncated, self.info = self.env.step(np.asarray(action, dtype=np.float64))
        self._touched |= self._touch()
        return bool(self.info["success"] > 0), bool(truncated) or self.env.curr_path_length >= \
            self.env.max_path_length

    def step(self, msg: dict) -> dict:
        c, env = self.control, self.env
        stop = msg.get("stop_on_success", True)
        states, successes, frames = [], [], []
        success, limit, external = False, False, 0

        def record(success: bool) -> None:  # after each of the message's actions
            states.append(self._state())
            successes.append(success)
            if msg.get("render"):
                frames.append(self._render())

        if msg.get("raw") is not None:  # Meta-World's own actions, one env step each
            for a in np.asarray(msg["raw"], dtype=np.float64).reshape(-1, 4):
                success, limit = self._env_step(a)
                external += 1
                record(success)
                if (success and stop) or limit:
                    break
        else:
            actions = np.asarray(msg["actions"], dtype=np.float64).reshape(-1, 7)
            k, scale = int(c["steps_per_action"]), float(env.action_scale)
            for a in actions:
                grip = self.tracker.apply(a, self._tcp())
                for _ in range(k):
                    if c.get("action_map", "target") == "target":
                        goal = self.tracker.pos + self.offset
                        xyz = np.clip((goal - self.d.mocap_pos[0]) / scale, -1.0, 1.0)
                    else:
                        xyz = np.clip(np.clip(a[:3], -c["max_dpos"], c["max_dpos"]) / (k * scale), -1.0, 1.0)
                    success, limit = self._env_step(np.r_[xyz, grip])
                    external += 1
                    if success or limit:
                        break
                record(success)
                if (success and stop) or limit:
                    break
        keys = states[0].keys()
        return {"states": {k_: np.stack([s[k_] for s in states]) for k_ in keys},
                "success": np.array(successes, dtype=bool), "executed": len(states), "external_steps": external,
                "limit": limit, "path_length": int(env.curr_path_length),
                "frames": np.stack(frames) if frames else None}

    def expert(self, msg: dict) -> dict:
        """The action (4,) of `metaworld.policies.<policy>` for the env's latest observation."""
        import metaworld.policies as policies

        if getattr(self, "_expert_name", None) != msg["policy"]:
            self._expert, self._expert_name = getattr(policies, msg["policy"])(), msg["policy"]
        return {"action": np.asarray(self._expert.get_action(self.obs), dtype=np.float64)}

    def _render(self) -> np.ndarray:
        if self._renderer is None:
            self._renderer = self.mj.Renderer(self.m, self.size, self.size)
        self._renderer.update_scene(self.d, camera=self.camera)
        img = self._renderer.render()
        # Meta-World's corner cameras are rolled 180 degrees: their raw images show the scene upside down
        return np.ascontiguousarray(img[::-1, ::-1] if self.turn else img)

    def render(self, msg: dict) -> dict:
        return {"image": self._render()}

    def success(self, msg: dict) -> dict:
        """Meta-World's success for the current state: `evaluate_state` on its latest observation."""
        _, info = self.env.evaluate_state(self.obs, np.zeros(4))
        return {"success": bool(info["success"] > 0)}

    def bench(self, msg: dict) -> dict:
        """Meta-World alone: `n` env.step calls with a zero mocap delta and an open gripper, timed here."""
        import time

        n = min(int(msg.get("n", 200)), self.env.max_path_length - self.env.curr_path_length)
        t0 = time.perf_counter()
        for _ in range(n):
            self.env.step(np.array([0.0, 0.0, 0.0, -1.0]))
        return {"seconds": time.perf_counter() - t0, "steps": n}


def main() -> int:
    return worker_common.serve(Worker(), ("make", "reset", "step", "expert", "render", "success", "bench"))


if __name__ == "__main__":
    sys.exit(main())
