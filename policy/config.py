"""Configuration of the chunk policy, its value critic and their training (dataclasses, validated on creation)."""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, get_args

from sim.constants import ACTION_DIM, CHUNK, MAX_OBJECTS, OBJ_DIM, PROPRIO_DIM

if TYPE_CHECKING:
    import torch
# torch is imported where it is used, so that reading the configuration and the budgets (the orchestrator does)
# does not load it

BackboneName = Literal["transformer", "deepsets"]
BACKBONES: tuple[str, ...] = get_args(BackboneName)
AMP_MODES = ("auto", "bf16", "off")
NEXT_VALUE_MODES = ("mean", "softmax")
AWR_WEIGHTINGS = ("exp", "filter")
SELECT_MODES = ("softmax_combine", "argmax", "sample")

# --- default budgets of a run: the `quick` preset (agent.presets) and the trainer's tool defaults read these ---
DEMOS_PER_FAMILY = 60
"""planner demonstrations per family for the base SFT"""
SFT_UPDATES = 1000
"""behaviour-cloning updates of the base policy"""
CRITIC_UPDATES = 120
"""K_Q: critic updates per training round"""
POLICY_UPDATES = 1000
"""K_π: policy updates per training round (250 per family of the quick run: the round decision experiment's size,
experiments/quick_run_v1/PROTOCOL.md)"""
ROLLOUTS_PER_SCENE = 2
"""N: rollouts per scene"""
EVAL_PER_SUITE = 24
"""evaluation scenes per (family, suite): 384 paired OOD episodes before and after a quick run"""


def _positive(name: str, value: float) -> None:
    if value <= 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")


def _in_unit(name: str, value: float, *, closed_high: bool = True) -> None:
    ok = 0.0 <= value <= 1.0 if closed_high else 0.0 <= value < 1.0
    if not ok:
        raise ValueError(f"{name} must be in [0, 1{']' if closed_high else ')'}, got {value!r}")


@dataclass
class PolicyConfig:
    """Architecture of `ChunkPolicy` and `ChunkCritic` (both read the same config)."""

    backbone: str = "transformer"
    """token encoder: "transformer" (self-attention over tokens) or "deepsets" (per-object MLP with FiLM
    conditioning on instruction + proprio, then attention pooling; no object-object interaction)"""
    d_model: int = 128
    """width of every token and hidden layer"""
    n_layers: int = 2
    """transformer blocks, or residual per-object MLP blocks for deepsets"""
    n_heads: int = 4
    """attention heads (transformer self-attention; deepsets pooling queries)"""
    ff_mult: int = 4
    """feed-forward hidden width as a multiple of d_model"""
    dropout: float = 0.0
    """dropout inside the backbone (0 keeps sampling and value targets deterministic given the RNG)"""
    chunk: int = CHUNK
    """control steps per action chunk (h)"""
    action_dim: int = ACTION_DIM
    """per-step action size: dpos (3), drot axis-angle (3), gripper (1)"""
    obj_dim: int = OBJ_DIM
    """features per object token"""
    proprio_dim: int = PROPRIO_DIM
    """proprioception features"""
    max_objects: int = MAX_OBJECTS
    """object tokens per observation (padding is masked)"""
    text_dim: int = 384
    """instruction embedding size (all-MiniLM-L6-v2 gives 384)"""
    log_std_min: float = -5.0
    """lower bound of the policy's log standard deviation (normalized action units)"""
    log_std_max: float = 0.5
    """upper bound of the policy's log standard deviation (normalized action units)"""
    nll_beta: float = 1.0
    """β-NLL exponent (Seitzer et al. 2022): each dimension's NLL is multiplied by the detached σ^(2β).
    0 is the plain Gaussian NLL (whose mean gradients vanish where σ grows: dimensions can get stuck
    unlearned); 1 gives the mean the gradients of MSE"""
    n_candidates: int = 8
    """chunks sampled per decision (j) for action selection and next-state values"""
    q_temperature: float = 0.5
    """softmax temperature over critic values when combining candidate chunks"""
    critic_heads: int = 2
    """Q heads on a shared critic encoder; TD targets use their minimum (clipped double Q)"""

    def __post_init__(self) -> None:
        if self.backbone not in BACKBONES:
            raise ValueError(f"backbone must be one of {', '.join(BACKBONES)}, got {self.backbone!r}")
        for name in ("d_model", "n_layers", "n_heads", "ff_mult", "chunk", "action_dim", "obj_dim",
                     "proprio_dim", "max_objects", "text_dim", "n_candidates", "critic_heads"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)!r}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model must be divisible by n_heads, got d_model={self.d_model}, n_heads={self.n_heads}")
        _in_unit("dropout", self.dropout, closed_high=False)
        if not self.log_std_min < self.log_std_max:
            raise ValueError(f"log_std_min must be < log_std_max, got {self.log_std_min} and {self.log_std_max}")
        _positive("q_temperature", self.q_temperature)
        if not 0.0 <= self.nll_beta <= 1.0:
            raise ValueError(f"nll_beta must be in [0, 1], got {self.nll_beta!r}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class TrainConfig:
    """Optimisation of the policy (BC / AWR) and the chunk value critic (shaped TD)."""

    lr: float = 3e-4
    """policy Adam learning rate"""
    critic_lr: float = 3e-4
    """critic Adam learning rate"""
    weight_decay: float = 0.0
    """AdamW weight decay for both networks"""
    batch_size: int = 256
    """transitions per update"""
    grad_clip: float = 1.0
    """max global gradient norm per update (0 disables clipping)"""
    gamma: float = 0.99
    """per control step discount; a chunk of h steps is discounted by gamma**h"""
    shaping_beta: float = 1.0
    """β of the shaped chunk reward r + γ^h βΦ(s') − βΦ(s) (0 = sparse rewards only)"""
    awr_beta: float = 0.1
    """AWR temperature: weights exp(A / awr_beta) (A in value units unless normalize_advantages)"""
    awr_weight_clip: float = 20.0
    """upper clip of the AWR weights"""
    normalize_advantages: bool = False
    """standardize advantages per batch before exp(A/β); makes awr_beta scale-free (then ~1.0 is typical)"""
    advantage: str = "mix"
    """q (critic only), mc (Monte-Carlo return − V) or mix (their mean); see policy.awr.advantages"""
    awr_weighting: str = "exp"
    """how advantages weight the policy's own chunks: "exp" (AWR, min(exp(A / awr_beta), clip)) or "filter" (the
    critic only selects: weight 1 on chunks with A > 0, 0 elsewhere, normalized to mean 1 over the kept ones, so
    the kept chunks are cloned as strongly as the demonstrations; `policy.awr.filter_weights`)"""
    bc_weight: float = 1.0
    """weight of the behaviour-cloning NLL on demonstrations added to the AWR loss (when demos are given)"""
    finetune_warmup: int = 25
    """each AWR phase starts a fresh policy optimizer whose learning rate ramps up linearly over this many
    updates (0: keep the optimizer and its rate). The SFT optimizer's second-moment estimates are stale for new
    data: its first AWR steps were many times lr and took a 50% pick_place policy to 8–10% in 10 updates"""
    branch_levels: int = 2
    """branch AWR (policy.branch): chunk boundaries of each scene's mean-policy episode that are branched"""
    branch_candidates: int = 8
    """branch AWR: chunks sampled from the policy and tried from each branch state"""
    branch_horizon: int = 3
    """branch AWR in scenes with a Text2potential Φ: chunks followed after the branched one before the branch is
    cut and its state valued by shaping_beta · Φ (scenes without Φ run to the end of the episode)"""
    branch_shaping: str = "cut"
    """branch AWR with Φ: "cut" values every branch of a shaped scene at the cut; "fallback" runs them to the end
    and uses Φ only in branch groups where no candidate and not the trunk succeeded (policy.branch)"""
    target_tau: float = 0.005
    """Polyak rate of the target critic after each critic update (1 = hard copy)"""
    next_value: str = "mean"
    """V(s') from j policy samples: "mean" of Q, or "softmax" (Q weighted by softmax(Q / q_temperature))"""
    td_candidates: int = 8
    """policy chunks sampled at s' to estimate V(s')"""
    seed: int = 0
    """seed of torch, numpy and the replay sampler"""
    device: str = "auto"
    """"auto" (cuda when available, else cpu), "cpu", "cuda" or "cuda:N\""""
    amp: str = "auto"
    """mixed precision of updates: "auto" (bf16 autocast on CUDA, off on CPU where it is slower), "bf16", "off\""""

    def __post_init__(self) -> None:
        for name in ("lr", "critic_lr", "awr_beta", "awr_weight_clip"):
            _positive(name, getattr(self, name))
        for name in ("weight_decay", "grad_clip", "shaping_beta", "bc_weight"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size!r}")
        if self.branch_horizon < 0:
            raise ValueError(f"branch_horizon must be >= 0, got {self.branch_horizon}")
        if self.branch_shaping not in ("cut", "fallback"):
            raise ValueError(f"branch_shaping must be cut or fallback, got {self.branch_shaping!r}")
        if self.branch_levels < 1 or self.branch_candidates < 1:
            raise ValueError(f"branch_levels and branch_candidates must be >= 1, got {self.branch_levels} and "
                             f"{self.branch_candidates}")
        if self.finetune_warmup < 0:
            raise ValueError(f"finetune_warmup must be >= 0, got {self.finetune_warmup!r}")
        if self.td_candidates < 1:
            raise ValueError(f"td_candidates must be >= 1, got {self.td_candidates!r}")
        _in_unit("gamma", self.gamma)
        if not 0.0 < self.target_tau <= 1.0:
            raise ValueError(f"target_tau must be in (0, 1], got {self.target_tau!r}")
        if self.advantage not in ("q", "mc", "mix"):
            raise ValueError(f"advantage must be one of q, mc, mix, got {self.advantage!r}")
        if self.awr_weighting not in AWR_WEIGHTINGS:
            raise ValueError(f"awr_weighting must be one of {', '.join(AWR_WEIGHTINGS)}, got {self.awr_weighting!r}")
        if self.amp not in AMP_MODES:
            raise ValueError(f"amp must be one of {', '.join(AMP_MODES)}, got {self.amp!r}")
        if self.next_value not in NEXT_VALUE_MODES:
            raise ValueError(f"next_value must be one of {', '.join(NEXT_VALUE_MODES)}, got {self.next_value!r}")
        if self.device != "auto":
            import torch

            try:
                torch.device(self.device)
            except RuntimeError as exc:
                raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {self.device!r}") from exc

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def autocast(cfg: TrainConfig, device: torch.device):
    """The autocast context of one update (bf16 needs no loss scaling; weights and optimizer stay float32)."""
    import torch

    on = cfg.amp == "bf16" or (cfg.amp == "auto" and device.type == "cuda")
    return torch.autocast(device.type, dtype=torch.bfloat16) if on else contextlib.nullcontext()


def resolve_device(name: str = "auto") -> torch.device:
    """"auto" → cuda when available, else cpu; anything else is passed to torch.device."""
    import torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError as exc:
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {name!r}") from exc
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {name!r} asked for but CUDA is not available; use 'auto' or 'cpu'")
    return device
