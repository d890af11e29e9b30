"""What benchmarks.calibrate_fix measures with the model: every token score of one split's
clean files, injected-bug windows and the same windows clean (`collect`, kept between runs
with `--cache`), and the fixer itself run at one setting of its rule (`at_setting`): clean
files flagged and changed, bugs located and repaired exactly."""

from __future__ import annotations

import pickle
import sys
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from benchmarks.heldout import BugExample, bug_examples, load_test_files
from diffusion_infill.infill.core.options import SamplerOptions
from diffusion_infill.infill.core.repair import prepare_repair, score_text, suspicious_spans
from diffusion_infill.infill.core.results import TokenScore
from diffusion_infill.infill.core.sampler import denoise


@dataclass
class Split:
    """Every token score of one split's clean files, bug windows and clean windows."""

    files: list[str]
    file_scores: list[list[TokenScore]]
    bugs: list[BugExample]
    bug_scores: list[list[TokenScore]]
    clean_scores: list[list[TokenScore]]  # the bug windows as written


def _head(text: str, max_chars: int) -> str:
    """The first whole lines of `text` within `max_chars` (at least one line)."""
    if len(text) <= max_chars:
        return text
    cut = text.rfind("\n", 0, max_chars)
    return text[: cut + 1] if cut > 0 else text[:max_chars]


def collect(
    den, corpus: Path, split: str, n_bugs: int, seed: int, max_chars: int, cache: Path | None
) -> Split:
    path = cache / f"{split}_{n_bugs}_{seed}_{max_chars}.pkl" if cache else None
    if path is not None and path.exists():
        return pickle.loads(path.read_bytes())
    files = [_head(t, max_chars) for t in load_test_files(corpus, split)]
    bugs = bug_examples(load_test_files(corpus, split), n_bugs, seed=seed)

    def score(texts: list[str], desc: str) -> list[list[TokenScore]]:
        return [
            score_text(t, denoiser=den)
            for t in tqdm(texts, desc=f"{split} {desc}", file=sys.stderr, leave=False)
        ]

    out = Split(
        files,
        score(files, "files"),
        bugs,
        score([b.buggy for b in bugs], "bugs"),
        score([b.clean for b in bugs], "clean windows"),
    )
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(pickle.dumps(out))
    return out


def _fix(den, text: str, scores: list[TokenScore], t: float, r: float) -> str | None:
    """What `fix_text` makes of `text` (its scores given): None when nothing passes."""
    picked = suspicious_spans(scores, text=text, max_fixes=1, min_suspicion=t, min_likely=r)
    if not picked:
        return None
    fill = prepare_repair(den, text, picked, SamplerOptions())
    denoise(fill.job, den)
    return fill.result().text


def at_setting(den, split: Split, t: float, r: float, name: str) -> dict:
    """The fixer run at (t, r): clean files flagged and changed, bug windows located and
    repaired exactly."""
    changed = flagged = 0
    for text, scores in tqdm(
        list(zip(split.files, split.file_scores, strict=True)),
        desc=f"{name} fix files",
        file=sys.stderr,
        leave=False,
    ):
        out = _fix(den, text, scores, t, r)
        flagged += out is not None
        changed += out is not None and out != text
    repaired = located = proposed = 0
    clean_proposed = sum(
        bool(suspicious_spans(s, text=b.clean, max_fixes=1, min_suspicion=t, min_likely=r))
        for s, b in zip(split.clean_scores, split.bugs, strict=True)
    )
    for bug, scores in tqdm(
        list(zip(split.bugs, split.bug_scores, strict=True)),
        desc=f"{name} fix bugs",
        file=sys.stderr,
        leave=False,
    ):
        picked = suspicious_spans(
            scores, text=bug.buggy, max_fixes=1, min_suspicion=t, min_likely=r
        )
        if not picked:
            continue
        proposed += 1
        located += picked[0][0] < bug.end and picked[0][1] > bug.start
        repaired += _fix(den, bug.buggy, scores, t, r) == bug.clean
    n, nb = len(split.files), len(split.bugs)
    return {
        "min_suspicion": t,
        "min_likely": r,
        "files": n,
        "clean_files_flagged": flagged / n,
        "clean_files_changed": changed / n,
        "clean_windows_flagged": clean_proposed / nb,
        "bug_windows": nb,
        "bug_windows_flagged": proposed / nb,
        "recall": located / nb,
        "precision": located / (proposed + clean_proposed) if proposed + clean_proposed else None,
        "exact_repair": repaired / nb,
    }
