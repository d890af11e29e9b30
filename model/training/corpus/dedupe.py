"""Deduplication: exact copies (SHA-256), then near copies (MinHash LSH over the set of
stripped lines), held-out files first so that they always win; and an audit of the
held-out code left in train below the file level."""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from diffusion_infill.model.training.corpus.packages import SPLITS, split_of
from diffusion_infill.model.training.corpus.records import SourceFile

NEAR_DUP_JACCARD = 0.85  # line-set similarity above which two files count as one
# Stricter for leakage: a training file this close to a held-out file is dropped.
CROSS_SPLIT_JACCARD = 0.7
LSH_BANDS, LSH_ROWS = 16, 4  # 64 MinHash values; P(candidate | J=0.7) = 0.99
MAX_TRAIN_CANDIDATES = 64  # train-vs-train comparisons per file (held-out: all)


def line_hashes(text: str) -> np.ndarray:
    """Sorted unique 64-bit hashes of the stripped non-empty lines."""
    lines = {ln.strip() for ln in text.splitlines()}
    lines.discard("")
    hashes = np.fromiter(
        (
            int.from_bytes(hashlib.blake2b(s.encode(), digest_size=8).digest(), "little")
            for s in lines
        ),
        dtype=np.uint64,
        count=len(lines),
    )
    return np.unique(hashes)


def minhash(hashes: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    """MinHash signature of a set of line hashes: (len(seeds),) uint64."""
    if hashes.size == 0:
        return np.zeros(len(seeds), dtype=np.uint64)
    mixed = (hashes[None, :] ^ seeds[:, None]) * np.uint64(0x9E3779B97F4A7C15)  # (S, N)
    return mixed.min(axis=1)


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """Jaccard similarity of two sorted sets of unique hashes."""
    inter = np.intersect1d(a, b, assume_unique=True).size
    return inter / max(1, a.size + b.size - inter)


def minhash_seeds() -> np.ndarray:
    """The fixed seeds of the MinHash signature: LSH_BANDS * LSH_ROWS of them."""
    return np.random.default_rng(0).integers(1, 2**63, size=LSH_BANDS * LSH_ROWS, dtype=np.uint64)


def band_keys(signature: np.ndarray) -> list[bytes]:
    """One LSH bucket key per band: the band's index and its LSH_ROWS signature values."""
    return [
        bytes([b]) + signature[b * LSH_ROWS : (b + 1) * LSH_ROWS].tobytes()
        for b in range(LSH_BANDS)
    ]


def drop_exact_duplicates(files: list[SourceFile], counts: Counter) -> list[SourceFile]:
    """The first of every set of identical texts (`files` in split order), the rest counted."""
    seen: dict[str, str] = {}  # text digest -> split of the kept copy
    kept: list[SourceFile] = []
    for f in files:
        digest = hashlib.sha256(f.text.encode()).hexdigest()
        split = split_of(f.unit)
        if digest in seen:
            counts[f"exact duplicate ({split} of {seen[digest]})"] += 1
            continue
        seen[digest] = split
        kept.append(f)
    return kept


@dataclass
class NearDuplicateIndex:
    """The files kept so far, their line hashes, and their LSH buckets (held-out and
    training files in separate buckets, so that every held-out candidate is compared)."""

    held: dict[bytes, list[int]] = field(default_factory=dict)  # band key -> held-out files
    train: dict[bytes, list[int]] = field(default_factory=dict)  # band key -> training files
    hashes: list[np.ndarray] = field(default_factory=list)
    kept: list[SourceFile] = field(default_factory=list)

    def duplicate_of(self, split: str, hashes: np.ndarray, keys: list[bytes]) -> str | None:
        """Why a file of `split` is a near duplicate of a kept file, or None if it is not."""
        for j in dict.fromkeys(j for k in keys for j in self.held.get(k, ())):
            other = split_of(self.kept[j].unit)
            limit = NEAR_DUP_JACCARD if other == split else CROSS_SPLIT_JACCARD
            if jaccard(hashes, self.hashes[j]) >= limit:
                return f"near duplicate ({split} of {other})"
        if split != "train":
            return None
        candidates = dict.fromkeys(j for k in keys for j in self.train.get(k, ()))
        for j in list(candidates)[:MAX_TRAIN_CANDIDATES]:
            if jaccard(hashes, self.hashes[j]) >= NEAR_DUP_JACCARD:
                return "near duplicate (train of train)"
        return None

    def add(self, f: SourceFile, split: str, hashes: np.ndarray, keys: list[bytes]) -> None:
        buckets = self.train if split == "train" else self.held
        for k in keys:
            buckets.setdefault(k, []).append(len(self.hashes))
        self.hashes.append(hashes)
        self.kept.append(f)


def drop_near_duplicates(files: list[SourceFile], counts: Counter) -> list[SourceFile]:
    """Files (in split order) that are no near copy of an earlier kept one; drops counted."""
    seeds = minhash_seeds()
    index = NearDuplicateIndex()
    for f in files:
        hashes = line_hashes(f.text)
        keys = band_keys(minhash(hashes, seeds))
        split = split_of(f.unit)
        reason = index.duplicate_of(split, hashes, keys)
        if reason is not None:
            counts[reason] += 1
            continue
        index.add(f, split, hashes, keys)
    return index.kept


def deduplicate(files: list[SourceFile], counts: Counter | None = None) -> list[SourceFile]:
    """Remove exact duplicates, then near duplicates (MinHash LSH on the set of lines).

    Files are taken split by split, test then valid then train, so a held-out file always
    wins over a training copy of it. A training file is dropped if it is an exact copy of
    a held-out file or has line-set Jaccard >= CROSS_SPLIT_JACCARD with one (every held-out
    candidate is checked); among files of one split, >= NEAR_DUP_JACCARD drops the later."""
    counts = Counter() if counts is None else counts
    rank = {s: i for i, s in enumerate(SPLITS)}
    ordered = sorted(files, key=lambda f: rank[split_of(f.unit)])  # stable within a split
    return drop_near_duplicates(drop_exact_duplicates(ordered, counts), counts)


def leak_audit(files: list[SourceFile], min_len: int = 50) -> dict[str, object]:
    """What held-out code is left in train below the file level: training files that share a
    long (>= `min_len` characters, not a comment) line with a held-out file, and the most
    such lines any one training file has (a copied function shows up here)."""
    held: dict[str, str] = {}
    for f in files:
        if split_of(f.unit) != "train":
            for ln in f.text.splitlines():
                ln = ln.strip()
                if len(ln) >= min_len and not ln.startswith(("#", '"""', "'''")):
                    held.setdefault(ln, f.unit)
    sharing: Counter = Counter()
    for f in files:
        if split_of(f.unit) == "train":
            n = sum(1 for ln in {ln.strip() for ln in f.text.splitlines()} if ln in held)
            if n:
                sharing[f"{f.unit}:{f.path}"] = n
    return {
        "held_out_long_lines": len(held),
        "train_files_sharing": len(sharing),
        "most_shared": dict(sharing.most_common(5)),
    }
