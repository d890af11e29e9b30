"""A small module with holes for `infill fill examples/holes.py`."""

import os


def read_lines(path):
    """Return the lines of a text file, without their line endings."""
    with open(path, encoding="utf-8") as fh:
        return [line.rstrip("\n") for line in <mask>]


def mean(values):
    if not values:
        raise ValueError("mean of an empty sequence")
    return <mask> / len(values)


def find_python_files(root):
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames:
            if name.endswith(<mask>):
                yield os.path.join(dirpath, name)
