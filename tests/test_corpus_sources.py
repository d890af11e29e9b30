"""The corpus's v3 sources and exclusions on tiny synthetic inputs (no network): Debian
packages and their DEP-5 copyright, the evaluation packages kept out of training under
any name, and public benchmarks kept out of the corpus."""

from __future__ import annotations

import io
import json
import tarfile
import zipfile
from pathlib import Path

from diffusion_infill.model.training import corpus
from diffusion_infill.model.training.corpus import debian, exclusions
from diffusion_infill.model.training.corpus.debian_packages import DEBIAN_PACKAGES
from diffusion_infill.model.training.corpus.packages_v3 import V3_PACKAGES

ROOT = Path(__file__).resolve().parent.parent

DEP5 = """Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: Widget
Source: https://example.org/widget

Files: *
Copyright: 2020 Someone
License: Expat

Files: widget/_speedups.py
 widget/compat/*
Copyright: 2021 Someone Else
License: BSD-3-clause

Files: debian/*
Copyright: 2022 A Packager
License: GPL-2+

License: Expat
 Permission is hereby granted, free of charge, ...
"""


def code(seed: int, lines: int = 30) -> str:
    return "".join(
        f"def f_{seed}_{i}(x):\n    return x * {i} + {seed}  # step {i}\n" for i in range(lines)
    )


def make_deb(
    cache: Path, name: str, version: str, copyright_text: str, files: dict[str, str]
) -> Path:
    """A minimal .deb: an ar archive holding debian-binary and data.tar.xz."""
    data = io.BytesIO()
    members = {
        f"./usr/share/doc/{name}/copyright": copyright_text,
        **{f"./usr/lib/python3/dist-packages/{p}": t for p, t in files.items()},
    }
    with tarfile.open(fileobj=data, mode="w:xz") as tf:
        for path, text in members.items():
            raw = text.encode()
            info = tarfile.TarInfo(path)
            info.size = len(raw)
            tf.addfile(info, io.BytesIO(raw))
    out = io.BytesIO()
    out.write(b"!<arch>\n")
    for member, payload in (("debian-binary", b"2.0\n"), ("data.tar.xz", data.getvalue())):
        out.write(f"{member:<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(payload):<10}`\n".encode())
        out.write(payload + (b"\n" if len(payload) % 2 else b""))
    path = cache / f"{name}_{version.replace(':', '%3a')}_all.deb"
    path.write_bytes(out.getvalue())
    return path


def wheel(cache: Path, name: str, version: str, files: dict[str, str]) -> None:
    dist = f"{name.replace('-', '_')}-{version}"
    with zipfile.ZipFile(cache / f"{dist}-py3-none-any.whl", "w") as zf:
        zf.writestr(
            f"{dist}.dist-info/METADATA",
            f"Metadata-Version: 2.1\nName: {name}\n"
            "Classifier: License :: OSI Approved :: MIT License\n",
        )
        for path, text in files.items():
            zf.writestr(path, text)


def test_dep5_is_parsed_and_its_upstream_licences_judged() -> None:
    parsed = debian.parse_dep5(DEP5)
    assert parsed is not None and parsed.upstream == "Widget"
    assert parsed.stanzas[1] == (["widget/_speedups.py", "widget/compat/*"], "BSD-3-clause")
    assert debian.dep5_licence(DEP5) == "MIT; BSD-3-clause"  # debian/* is packaging only
    assert debian.dep5_allowed(debian.dep5_licence(DEP5))
    copyleft = DEP5.replace("License: BSD-3-clause", "License: LGPL-2.1+")
    assert not debian.dep5_allowed(debian.dep5_licence(copyleft))
    either = DEP5.replace("License: BSD-3-clause", "License: Expat or GPL-2+")
    assert debian.dep5_allowed(debian.dep5_licence(either))
    old_style = "This package was debianized by someone.\n\nLicense: BSD\n"
    assert debian.parse_dep5(old_style) is None
    assert debian.dep5_licence(old_style) == "not DEP-5"
    assert not debian.dep5_allowed("not DEP-5")
    assert debian.spdx_like("Expat and public-domain") == "MIT AND Public Domain"


def test_deb_files_reads_dist_packages_and_names(tmp_path: Path) -> None:
    deb = make_deb(
        tmp_path,
        "python3-widget",
        "1:2.0-1",
        DEP5,
        {
            "widget/__init__.py": code(1),
            "widget/_vendor/x.py": code(2),
            "Widget-2.0.egg-info/PKG-INFO": "Name: Widget\n",
        },
    )
    assert debian.deb_in(tmp_path, "python3-widget", "1:2.0-1") == deb
    source, files, names = debian.deb_files(deb, "debian/python3-widget", "1:2.0-1")
    assert [p for p, _ in files] == ["widget/__init__.py"]  # vendored folder skipped
    assert (source.kind, source.licence, source.files) == ("deb", "MIT; BSD-3-clause", 1)
    assert {"python3-widget", "widget", "Widget"} <= set(names)


def test_eval_packages_follow_the_benchmark_scripts() -> None:
    named = set()
    for script in exclusions.EVAL_SCRIPTS:
        if (ROOT / script).exists():
            named |= exclusions.packages_named_in((ROOT / script).read_text())
    assert named <= exclusions.eval_packages()
    assert {corpus.canonical(n) for n in exclusions.EVAL_PACKAGES} >= named, (
        "an evaluation script names a package that EVAL_PACKAGES does not list yet"
    )
    source = 'PACKAGES = {"Foo_Bar": "1.0"}\nPINS: list = ["baz"]\nOTHER = {"qux": 1}\n'
    assert exclusions.packages_named_in(source) == {"foo-bar", "baz"}


def test_no_new_source_is_an_evaluation_or_held_out_package() -> None:
    excluded = exclusions.eval_packages() | {
        "click",
        "attrs",
        "requests",
        "more-itertools",
        "itsdangerous",
        "h11",
        "toolz",
    }
    assert not {corpus.canonical(n) for n in V3_PACKAGES} & excluded
    listed = {exclusions.excluded_project([n], frozenset(excluded)) for n in DEBIAN_PACKAGES}
    assert listed - {None} == {"click", "docopt", "tabulate"}  # listed to be recorded


def test_excluded_project_and_copies_under_other_names() -> None:
    excluded = frozenset({"click", "python-slugify", "tabulate"})
    assert exclusions.excluded_project(["python3-click"], excluded) == "click"
    assert (
        exclusions.excluded_project(["python3-widget", "Python_Slugify"], excluded)
        == "python-slugify"
    )
    assert exclusions.excluded_project(["python3-clickhouse"], excluded) is None
    imports = exclusions.import_names({"tabulate", "python-slugify", "parse", "ply", "rsa"})
    assert imports >= {"tabulate", "slugify", "ply"}
    copies = exclusions.copies_eval_module
    assert copies("pkg/tabulate.py", set(), imports)
    assert copies("pycparser/ply/lex.py", {"pycparser/ply"}, imports)
    assert copies("ray/thirdparty_files/rsa/key.py", {"ray/thirdparty_files/rsa"}, imports)
    assert not copies("tests/ply/data.py", set(), imports)  # not a package
    assert not copies("urllib/parse.py", set(), imports)  # generic names
    assert not copies("nltk/parse/chart.py", {"nltk/parse"}, imports)
    assert not copies("cryptography/asymmetric/rsa.py", set(), imports)  # its own rsa.py


def test_benchmark_names() -> None:
    named = exclusions.benchmark_named
    assert named("evals/human_eval/data.py") == "HumanEval"
    assert named('load_dataset("openai_humaneval")') == "HumanEval"
    assert named("data/mbpp.jsonl") == "MBPP"
    assert named("QuixBugs/python_programs/gcd.py") == "QuixBugs"
    assert named('load_dataset("codeparrot/apps")') == "APPS"
    assert named("cruxeval_tasks.py") == "CRUXEval"
    assert named("DS-1000 problems") == "DS-1000"
    assert named("django/apps/registry.py") is None
    assert named("mmdet/evaluation/crowdhuman_eval.py") is None
    assert named("INSTALLED_APPS = []") is None


def test_build_keeps_out_evaluation_packages_and_benchmarks(tmp_path: Path) -> None:
    cache, debs = tmp_path / "cache", tmp_path / "cache" / "debian"
    debs.mkdir(parents=True)
    wheel(cache, "click", "1.0", {"click/core.py": code(1)})
    wheel(
        cache,
        "good",
        "1.0",
        {
            "good/a.py": code(2),
            "good/tabulate.py": code(3),
            "good/b.py": code(4) + '\nNAME = "HumanEval"\n',
        },
    )
    wheel(cache, "bench", "1.0", {"bench/c.py": code(5), "bench/mbpp/__init__.py": code(6)})
    make_deb(debs, "python3-widget", "2.0-1", DEP5, {"widget/w.py": code(7)})
    make_deb(
        debs, "python3-click", "8.0-1", DEP5.replace("Widget", "click"), {"click/core.py": code(8)}
    )
    make_deb(
        debs, "python3-gpl", "1.0-1", DEP5.replace("BSD-3-clause", "GPL-3+"), {"gpl/g.py": code(9)}
    )
    out = tmp_path / "out"
    corpus.build(
        out,
        cache,
        stdlib=tmp_path / "no-stdlib",
        packages={"click": "1.0", "good": "1.0", "bench": "1.0"},
        sdists=frozenset(),
        debian={"python3-widget": "2.0-1", "python3-click": "8.0-1", "python3-gpl": "1.0-1"},
    )
    licences = json.loads((out / "licences.json").read_text())
    assert licences["debian/python3-widget"]["kept"] == "yes"
    assert licences["debian/python3-click"]["kept"] == "no (held out: click)"
    assert licences["debian/python3-gpl"]["kept"] == "no (licence)"
    assert licences["bench"]["kept"] == "no (bundles MBPP)"
    train = [json.loads(ln) for ln in (out / "train.jsonl").read_text().splitlines()]
    assert sorted((r["unit"], r["path"]) for r in train) == [
        ("debian/python3-widget", "widget/w.py"),
        ("good", "good/a.py"),
    ]
    assert [r["unit"] for r in map(json.loads, (out / "test.jsonl").open())] == ["click"]
    stats = json.loads((out / "stats.json").read_text())
    assert stats["benchmark_mentions"] == ["good:good/b.py (HumanEval)"]
    assert stats["dropped"]["held-out or evaluation package"] == 1
