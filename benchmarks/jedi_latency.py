"""What jedi costs the `member` check: the first call in a process, and later ones.

    python -m benchmarks.jedi_latency [--files 40] [--uses 5] [--out PATH]

On the real files of packages outside the corpus (data/real_files.jsonl), each file's
first attribute reads (`x.attr`) are judged as a fill's would be (`missing_members`, no
budget): the first call of the process (jedi loads its stubs of the builtins), then, per
file, each use judged in a text changed at that use (a new candidate: jedi parses the
text again), and the same use asked again (cached). Writes
benchmarks/results/names/jedi_latency.json.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from benchmarks.real_files import load as load_real
from benchmarks.results_file import write_results
from diffusion_infill.infill.core.checks import member_uses
from diffusion_infill.infill.core.jedi_names import missing_members
from diffusion_infill.infill.core.scopes import python_parser


def _uses(text: str, limit: int) -> list:
    data = text.encode("utf-8")
    root = python_parser().parse(data).root_node
    found = [u for u in member_uses(root, data, (0, len(data))) if u.dot is not None]
    return found[:limit]


def _ms(call) -> float:  # noqa: ANN001
    t0 = time.perf_counter()
    call()
    return (time.perf_counter() - t0) * 1000


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--real-files", type=Path, default=Path("data/real_files.jsonl"))
    parser.add_argument("--files", type=int, default=40)
    parser.add_argument("--uses", type=int, default=5, help="attribute reads judged per file")
    parser.add_argument(
        "--out", type=Path, default=Path("benchmarks/results/names/jedi_latency.json")
    )
    args = parser.parse_args(argv)
    texts = [t for t in load_real(args.real_files) if _uses(t, 1)][: args.files]
    first = None
    new_text, cached, sizes = [], [], []
    for text in texts:
        sizes.append(text.count("\n") + 1)
        for use in _uses(text, args.uses):
            # a changed candidate: a comment at the use's line end makes a new text
            end = text.find("\n", use.start)
            changed = text[:end] + "  # x" + text[end:] if end >= 0 else text + "  # x"
            ms = _ms(lambda c=changed, u=use: missing_members(c, [(0, u)]))
            if first is None:
                first = ms
            else:
                new_text.append(ms)
            cached.append(_ms(lambda c=changed, u=use: missing_members(c, [(0, u)])))
    out = {
        "command": "python -m benchmarks.jedi_latency "
        + " ".join(sys.argv[1:] if argv is None else argv),
        "files": len(texts),
        "file_lines_p50": statistics.median(sizes),
        "first_call_ms": round(first or 0.0, 1),
        "new_text_calls": len(new_text),
        "new_text_ms_p50": round(statistics.median(new_text), 1),
        "new_text_ms_p95": round(statistics.quantiles(new_text, n=20)[-1], 1),
        "new_text_ms_max": round(max(new_text), 1),
        "cached_ms_p50": round(statistics.median(cached), 3),
    }
    print(out)
    write_results("jedi_latency", None, out, args.out)


if __name__ == "__main__":
    main()
