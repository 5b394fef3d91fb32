#!/usr/bin/env python3
"""Writes every ```cpp block of a Markdown file into one C++ file.

Blocks are concatenated in order, with their #include lines moved to the top,
so that the README's samples are compiled by tests/readme and cannot rot.

usage: extract_cpp_blocks.py README.md OUT.cc
"""
import sys


def main(argv):
    if len(argv) != 3:
        sys.exit("usage: extract_cpp_blocks.py README.md OUT.cc")
    includes, body, block, inside = [], [], 0, False
    with open(argv[1], encoding="utf-8") as f:
        for line in f:
            stripped = line.strip()
            if not inside and stripped == "```cpp":
                inside, block = True, block + 1
                body.append(f"// ---- README.md C++ block {block}\n")
            elif inside and stripped == "```":
                inside = False
            elif inside and stripped.startswith("#include"):
                if line not in includes:
                    includes.append(line)
            elif inside:
                body.append(line)
    if inside:
        sys.exit(f"{argv[1]}: a ```cpp block is not closed")
    if block == 0:
        sys.exit(f"{argv[1]}: no ```cpp block found")
    with open(argv[2], "w", encoding="utf-8") as out:
        out.write("// Generated from README.md by tools/extract_cpp_blocks.py.\n")
        out.writelines(sorted(includes))
        out.writelines(body)


if __name__ == "__main__":
    main(sys.argv)
