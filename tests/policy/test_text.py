"""Instruction embeddings: the offline MiniLM (one test) and the deterministic fallback."""

from __future__ import annotations

import numpy as np
import pytest

from policy.text import TEXT_DIM, HashEmbedder, get_embedder


def test_minilm_offline_cached_and_semantic():
    emb = get_embedder("minilm")
    texts = ["put the mug in the bowl", "place the cup into the bowl", "open the top drawer"]
    vecs = emb.embed(texts)
    assert vecs.shape == (3, TEXT_DIM) and vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert vecs[0] @ vecs[1] > vecs[0] @ vecs[2] + 0.2  # paraphrase closer than another task
    assert emb.embed_one(texts[0]) is not emb.embed_one(texts[0])  # callers get copies...
    np.testing.assert_array_equal(emb.embed_one(texts[0]), vecs[0])  # ...of the cached vector
    assert get_embedder("minilm") is emb


def test_hash_embedder_is_deterministic():
    a, b = HashEmbedder(), HashEmbedder(cache_size=2)
    texts = ["stack the red block", "stack the blue block", "open the door"]
    np.testing.assert_array_equal(a.embed(texts), b.embed(texts))
    v = a.embed(texts)
    assert v.shape == (3, TEXT_DIM) and v.dtype == np.float32
    assert v[0] @ v[1] > v[0] @ v[2]
    assert len(b._cache) == 2  # LRU bound
    with pytest.raises(TypeError, match="sequence of strings"):
        a.embed("open the door")
    with pytest.raises(ValueError, match="kind"):
        get_embedder("bert")
