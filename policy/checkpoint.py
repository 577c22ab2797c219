"""Training state (policy, critic, target critic, optimizers, configs, RNG) and exact-resume checkpoints.

Training code that draws randomness only from torch's global RNG (policy sampling, dropout) and from
`TrainState.rng` (replay sampling) resumes bit-for-bit on CPU after `load_checkpoint`.
A LoRA-wrapped policy is saved with its adapter settings and re-wrapped on load.
"""

from __future__ import annotations

import copy
import random
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from .config import PolicyConfig, TrainConfig, resolve_device
from .modeling import ChunkCritic, ChunkPolicy

FORMAT_VERSION = 1


def seed_everything(seed: int) -> None:
    """Seed python, numpy's global RNG and torch (CPU and CUDA)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def make_optimizer(module: nn.Module, lr: float, weight_decay: float = 0.0) -> torch.optim.Optimizer:
    """AdamW over the trainable parameters (Adam when weight_decay = 0)."""
    return torch.optim.AdamW([p for p in module.parameters() if p.requires_grad], lr=lr, weight_decay=weight_decay)


@dataclass
class TrainState:
    policy_config: PolicyConfig
    train_config: TrainConfig
    policy: nn.Module
    """ChunkPolicy, or a peft PeftModel around one"""
    policy_optimizer: torch.optim.Optimizer
    critic: ChunkCritic | None = None
    critic_target: ChunkCritic | None = None
    critic_optimizer: torch.optim.Optimizer | None = None
    rng: np.random.Generator = field(default_factory=np.random.default_rng)
    """replay sampling generator (its state is checkpointed)"""
    step: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    """small JSON-like metadata saved with the checkpoint (e.g. round, family, metrics)"""

    @property
    def device(self) -> torch.device:
        return next(self.policy.parameters()).device

    def attach_critic(self) -> None:
        """Create critic, target critic and critic optimizer (e.g. after SFT, before AWR)."""
        self.critic = ChunkCritic(self.policy_config).to(self.device)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.critic_optimizer = make_optimizer(self.critic, self.train_config.critic_lr, self.train_config.weight_decay)

    def reset_policy_optimizer(self) -> None:
        """New optimizer over the currently trainable policy parameters (call after wrapping with LoRA)."""
        self.policy_optimizer = make_optimizer(self.policy, self.train_config.lr, self.train_config.weight_decay)


def build_train_state(policy_config: PolicyConfig, train_config: TrainConfig, with_critic: bool = True,
                      device: str | torch.device | None = None) -> TrainState:
    """Seed everything from train_config.seed and build fresh networks and optimizers."""
    seed_everything(train_config.seed)
    device = torch.device(device) if device is not None else resolve_device(train_config.device)
    policy = ChunkPolicy(policy_config).to(device)
    state = TrainState(policy_config, train_config, policy,
                       make_optimizer(policy, train_config.lr, train_config.weight_decay),
                       rng=np.random.default_rng(train_config.seed))
    if with_critic:
        state.attach_critic()
    return state


def _lora_settings(policy: nn.Module) -> dict | None:
    from peft import PeftModel

    if not isinstance(policy, PeftModel):
        return None
    cfg = policy.peft_config["default"]
    return {"r": int(cfg.r), "alpha": float(cfg.lora_alpha), "dropout": float(cfg.lora_dropout),
            "targets": sorted(cfg.target_modules), "train_head": bool(cfg.modules_to_save)}


def _rng_state(rng: np.random.Generator) -> dict:
    out = {"numpy_generator": rng.bit_generator.state, "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        out["cuda"] = torch.cuda.get_rng_state_all()
    return out


def save_checkpoint(path: str | Path, state: TrainState) -> Path:
    """Write everything needed to resume training exactly into one file (torch.save)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "format": FORMAT_VERSION,
        "policy_config": state.policy_config.to_dict(),
        "train_config": state.train_config.to_dict(),
        "lora": _lora_settings(state.policy),
        "policy": state.policy.state_dict(),
        "policy_optimizer": state.policy_optimizer.state_dict(),
        "critic": state.critic.state_dict() if state.critic is not None else None,
        "critic_target": state.critic_target.state_dict() if state.critic_target is not None else None,
        "critic_optimizer": state.critic_optimizer.state_dict() if state.critic_optimizer is not None else None,
        "step": state.step,
        "rng": _rng_state(state.rng),
        "extra": state.extra,
    }
    tmp = fresh(path.with_name(path.name + ".tmp"))
    torch.save(payload, tmp)
    tmp.replace(path)
    return path


MAX_CHECKPOINT_BYTES = 2 << 30
"""largest checkpoint file read (the protocol's policies are ≈ 6 MB)"""
MAX_PARAMETERS = 500_000_000
"""largest policy a checkpoint may describe (parameters its config implies, checked before the model is built)"""


def own_file(path: Path) -> Path:
    """`path` if it is a regular file of its folder: not a symlink (which could lead out of the run directory) and
    not a FIFO, device or directory (which could block or flood a read)."""
    if path.is_symlink():
        raise ValueError(f"{path.name} in {path.parent} is a symlink; the servers read only their own files there")
    if not path.is_file():
        raise ValueError(f"{path.name} in {path.parent} is not a regular file")
    return path


def fresh(path: Path) -> Path:
    """`path` with whatever stood there removed, so a write creates a new file instead of following a symlink."""
    path.unlink(missing_ok=True)
    return path


def _config_parameters(cfg: PolicyConfig) -> int:
    """Parameters the policy's trunk will have (attention 4·d², feed-forward 2·ff·d² per layer), an upper bound of
    the order of the real count."""
    return cfg.n_layers * (4 + 2 * cfg.ff_mult) * cfg.d_model ** 2


def read_payload(path: str | Path) -> dict:
    """The checked contents of a checkpoint file (no model built): a regular file of at most MAX_CHECKPOINT_BYTES,
    read with `weights_only`, of this code's format, with valid configs of a plausible size. ValueError otherwise."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"checkpoint {path} does not exist")
    if not path.is_file():  # a FIFO or device would block or flood the read
        raise ValueError(f"{path} is not a regular file")
    if path.stat().st_size > MAX_CHECKPOINT_BYTES:
        raise ValueError(f"{path} is {path.stat().st_size} bytes; a checkpoint holds at most {MAX_CHECKPOINT_BYTES}")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any unreadable file: pickle, zip and torch errors alike
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
        raise ValueError(f"{path} is not a CoDA checkpoint (torch.load: {type(exc).__name__}: {first})") from None
    if not isinstance(payload, dict):
        raise ValueError(f"{path} is not a CoDA checkpoint (it holds a {type(payload).__name__}, not a dict)")
    if payload.get("format") != FORMAT_VERSION:
        raise ValueError(f"checkpoint {path} has format {payload.get('format')!r}; this code reads {FORMAT_VERSION}")
    missing = [k for k in ("policy_config", "train_config", "policy", "step", "extra", "lora", "critic", "rng",
                           "policy_optimizer") if k not in payload]
    if missing:
        raise ValueError(f"checkpoint {path} lacks {missing}")
    for key, cls in (("policy_config", PolicyConfig), ("train_config", TrainConfig)):
        try:
            cfg = cls(**payload[key])
        except (TypeError, ValueError) as exc:
            raise ValueError(f"checkpoint {path}: invalid {key} ({exc})") from None
        if key == "policy_config" and _config_parameters(cfg) > MAX_PARAMETERS:
            raise ValueError(f"checkpoint {path}: its policy_config describes ≈ {_config_parameters(cfg):.3g} "
                             f"parameters; at most {MAX_PARAMETERS:.3g} are loaded")
    return payload


def load_checkpoint(path: str | Path, device: str | torch.device | None = None,
                    restore_rng: bool = True) -> TrainState:
    """Rebuild the TrainState saved by `save_checkpoint`, on `device` (default: train_config.device), from a file
    `read_payload` accepts.

    restore_rng puts torch's global RNG and the replay generator back where they were at save time.
    A file that passes `read_payload` but whose parts do not fit together (weights of another shape, a broken
    optimizer, LoRA or RNG entry) raises one ValueError naming the file and the part, as a bad format does.
    """
    path = Path(path)
    payload = read_payload(path)
    policy_config = PolicyConfig(**payload["policy_config"])
    train_config = TrainConfig(**payload["train_config"])
    device = torch.device(device) if device is not None else resolve_device(train_config.device)
    policy: nn.Module = ChunkPolicy(policy_config)
    if payload["lora"] is not None:
        with _part(path, "the lora settings cannot be applied"):
            policy = _wrap_lora(policy, payload["lora"])
    with _part(path, "the policy weights do not fit its policy_config"):
        _load_tensors(policy, payload["policy"])
    policy.to(device)
    with _part(path, "the step is not an integer"):
        step = int(payload["step"])
    with _part(path, "the extra metadata is not a dict"):
        extra = dict(payload["extra"])
    state = TrainState(policy_config, train_config, policy,
                       make_optimizer(policy, train_config.lr, train_config.weight_decay), step=step, extra=extra)
    with _part(path, "the policy_optimizer does not fit the policy"):
        state.policy_optimizer.load_state_dict(payload["policy_optimizer"])
    if payload["critic"] is not None:
        state.attach_critic()
        for name, module in (("critic", state.critic), ("critic_target", state.critic_target)):
            with _part(path, f"the {name} weights do not fit its policy_config"):
                _load_tensors(module, payload.get(name))
        with _part(path, "the critic_optimizer does not fit the critic"):
            state.critic_optimizer.load_state_dict(payload.get("critic_optimizer"))
    state.rng = np.random.default_rng()
    if restore_rng:
        with _part(path, "the rng state cannot be restored"):
            _restore_rng(state.rng, payload["rng"])
    return state


@contextmanager
def _part(path: Path, what: str):
    """Turn what torch, peft or numpy raise on one malformed part of a checkpoint into one ValueError naming the
    file and the part: a user who passes a damaged file gets a line, not a traceback from deep inside torch."""
    try:
        yield
    except torch.OutOfMemoryError:  # not the file's fault
        raise
    except (RuntimeError, TypeError, ValueError, KeyError, AttributeError, IndexError) as exc:
        if isinstance(exc, KeyError):
            detail = f"no {exc.args[0]!r} entry" if exc.args else "an entry is missing"
        else:
            detail = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise ValueError(f"checkpoint {path}: {what} ({detail})") from None


def _wrap_lora(policy: nn.Module, lora: dict) -> nn.Module:
    from .lora import add_lora

    return add_lora(policy, lora["r"], lora["alpha"], lora["dropout"], lora["train_head"], tuple(lora["targets"]))


def _load_tensors(module: nn.Module, saved: Any) -> None:
    """`module.load_state_dict(saved)`, first checking names and shapes so a mismatch is said in a few words (torch
    lists every missing tensor, one per line)."""
    if not isinstance(saved, dict):
        raise ValueError(f"holds a {type(saved).__name__}, not a dict of tensors")
    expected = module.state_dict()
    missing = [k for k in expected if k not in saved]
    unexpected = [k for k in saved if k not in expected]
    if missing or unexpected:
        raise ValueError(f"{len(missing)} tensors missing ({_few(missing)}), {len(unexpected)} unexpected "
                         f"({_few(unexpected)})")
    for name, tensor in saved.items():
        if not isinstance(tensor, torch.Tensor):
            raise ValueError(f"{name} is a {type(tensor).__name__}, not a tensor")
        if tensor.shape != expected[name].shape:
            raise ValueError(f"{name} has shape {tuple(tensor.shape)}, the config gives {tuple(expected[name].shape)}")
    module.load_state_dict(saved)


def _few(names: list[str], shown: int = 3) -> str:
    return ", ".join(names[:shown]) + (", ..." if len(names) > shown else "") if names else "none"


def _restore_rng(rng: np.random.Generator, saved: dict) -> None:
    rng.bit_generator.state = saved["numpy_generator"]
    torch.set_rng_state(saved["torch"])
    if "cuda" in saved and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(saved["cuda"])


def load_policy(path: str | Path, device: str | torch.device = "cpu", merge_lora: bool = True) -> nn.Module:
    """Only the policy of a checkpoint, in eval mode (LoRA merged by default), for rollouts and evaluation."""
    state = load_checkpoint(path, device=device, restore_rng=False)
    policy = state.policy
    if merge_lora and _lora_settings(policy) is not None:
        from .lora import merge

        policy = merge(policy)
    return policy.eval()



def average_checkpoints(paths: list[str | Path], out: str | Path) -> Path:
    """Write to `out` the checkpoint whose policy (and critic, where every input has one) is the uniform average
    of the weights of `paths` — checkpoints of one architecture, e.g. the ends of a run's rounds or training
    replicates grown from one base. Everything else (optimizer, step, rng, extra) is the last input's. ValueError
    when fewer than two are given or their architectures differ."""
    if len(paths) < 2:
        raise ValueError(f"averaging needs at least two checkpoints, got {len(paths)}")
    payloads = [read_payload(p) for p in paths]
    first = payloads[0]
    for p, payload in zip(paths[1:], payloads[1:], strict=True):
        for key in ("policy_config", "lora"):
            if payload[key] != first[key]:
                raise ValueError(f"{p}: its {key} differs from {paths[0]}'s; only one architecture can be averaged")
    out_payload = dict(payloads[-1])
    parts = ["policy"] + (["critic", "critic_target"] if all(p["critic"] is not None for p in payloads) else [])
    for part in parts:
        averaged = {}
        for name, tensor in first[part].items():
            if tensor.is_floating_point():
                averaged[name] = torch.stack([p[part][name] for p in payloads]).mean(0)
            else:  # counters and integer buffers: the last input's
                averaged[name] = payloads[-1][part][name]
        out_payload[part] = averaged
    if len(parts) == 1:
        out_payload.update(critic=None, critic_target=None, critic_optimizer=None)
    out_payload["extra"] = {**payloads[-1]["extra"], "averaged_from": [str(p) for p in paths]}
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = fresh(out.with_name(out.name + ".tmp"))
    torch.save(out_payload, tmp)
    tmp.replace(out)
    return out
