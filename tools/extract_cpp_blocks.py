#!/usr/bin/env python3
"""Writes every ```cpp block of one or more Markdown files into one C++ file.

Blocks are concatenated in order (file by file, in the order given), with
their #include lines moved to the top and deduplicated, so that the samples
of README.md (tests/readme) and of docs/guides/*.md (tests/docs) are compiled
and cannot rot. Only blocks fenced ```cpp are taken: ```c++ marks a sample
that is compiled elsewhere (the README's hello.cc, built in a fresh workspace
by tools/check_readme_workspace.sh).

usage: extract_cpp_blocks.py IN.md [IN.md ...] OUT.cc

A file with no ```cpp block is fine when several are given (a guide may have
none); all of them together must hold at least one, and every block must be
closed.
"""
import os
import sys


def extract(path, includes, body):
    """Appends path's blocks to includes and body; returns how many."""
    name = os.path.basename(path)
    block, inside = 0, False
    with open(path, encoding="utf-8") as f:
        for line in f:
            stripped = line.strip()
            if not inside and stripped == "```cpp":
                inside, block = True, block + 1
                body.append(f"// ---- {name} C++ block {block}\n")
            elif inside and stripped == "```":
                inside = False
            elif inside and stripped.startswith("#include"):
                if line not in includes:
                    includes.append(line)
            elif inside:
                body.append(line)
    if inside:
        sys.exit(f"{path}: a ```cpp block is not closed")
    return block


def main(argv):
    if len(argv) < 3 or not argv[-1].endswith(".cc"):
        sys.exit("usage: extract_cpp_blocks.py IN.md [IN.md ...] OUT.cc")
    inputs, out_path = argv[1:-1], argv[-1]
    includes, body, total = [], [], 0
    for path in inputs:
        total += extract(path, includes, body)
    if total == 0:
        sys.exit(f"{', '.join(inputs)}: no ```cpp block found")
    names = ", ".join(os.path.basename(p) for p in inputs)
    with open(out_path, "w", encoding="utf-8") as out:
        out.write(f"// Generated from {names} by tools/extract_cpp_blocks.py.\n")
        out.writelines(sorted(includes))
        out.writelines(body)


if __name__ == "__main__":
    main(sys.argv)
