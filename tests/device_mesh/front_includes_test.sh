#!/bin/bash
# devmesh/tests/device_mesh/front_includes_test.sh
# device_mesh/ reaches backends through comm's front only:
#  1. it includes comm's front headers only (comm/<name>.h), never a file of
#     a backend's package (comm/nccl/, comm/shm/, comm/two_level/, ...): a
#     backend is reached through the registry, its option codec and
#     comm/auto_group.h;
#  2. no string literal in its code names a backend ("nccl", "gloo", "ucx",
#     "shm", alone or quoted inside a message as \"nccl\"): what it needs to
#     know of a backend it asks the registry (comm/registry.h's TraitsOf,
#     RegisteredDefaultBackendFor, ...; comm/auto_group.h). Comments may
#     name them;
#  3. no identifier in its code has a part gloo, ucx or shm (options.gloo,
#     CreateShmGroup, a variable named so): their fields and functions are
#     their packages'. NCCL's typed options stay the user's
#     (GroupOptions::nccl, NcclOptions; comm/options.h), so nccl is allowed
#     there.
# Arguments: every source and header of //device_mesh. Prints each
# offending line and fails; prints the count checked.
set -u
files=0
bad=0
for f in "$@"; do
  files=$((files + 1))
  while IFS= read -r line; do
    echo "includes a backend's file: $f: $line"
    bad=$((bad + 1))
  done < <(grep -n '^#include "comm/[^"]*/' "$f")
done
if [ "$files" -eq 0 ]; then
  echo "no files given"
  exit 1
fi
# The string literals of each file, outside comments (a small C++ lexer:
# comments, string and character literals, raw strings).
literals=$(python3 - "$@" <<'PY'
import re
import sys

NAMES = ("nccl", "gloo", "ucx", "shm")
QUOTED = re.compile(r'\\"(%s)\\"' % "|".join(NAMES))

IDENT_PARTS = ("gloo", "ucx", "shm")
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")

def ident_hits(code):
    """Identifiers of `code` with a part (snake or camel case) in IDENT_PARTS."""
    for word in WORD.findall(code):
        parts = [m.lower() for piece in word.split("_") for m in PART.findall(piece)]
        if any(part in IDENT_PARTS for part in parts):
            yield word

def literals(text):
    i, n, line = 0, len(text), 1
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            line += text.count("\n", i, j)
            i = j
        elif c == '"' or c == "'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            if c == '"':
                yield "lit", line, text[i + 1:j]
            i = j + 1
        elif c.isalnum() or c == "_":
            # A whole word; R, u8R, uR, UR or LR right before a quote opens
            # a raw string: R"delim(...)delim".
            j = i
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            if (text[i:j] in ("R", "u8R", "uR", "UR", "LR") and j < n and
                    text[j] == '"'):
                k = text.find("(", j + 1)
                delim = text[j + 1:k]
                end = text.find(")" + delim + '"', k)
                end = n if end < 0 else end
                yield "lit", line, text[k + 1:end]
                line += text.count("\n", i, end)
                j = min(n, end + len(delim) + 2)
            elif not text.startswith("#include", max(0, i - 1)):
                yield "code", line, text[i:j]
            i = j
        else:
            i += 1

for path in sys.argv[1:]:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for kind, line, body in literals(text):
        if kind == "lit" and (body in NAMES or QUOTED.search(body)):
            print("names a backend in a string literal: %s:%d: \"%s\"" %
                  (path, line, body))
        elif kind == "code":
            for word in ident_hits(body):
                print("names a backend's field or function: %s:%d: %s" %
                      (path, line, word))
PY
) || { echo "the literal check failed to run"; exit 1; }
while IFS= read -r line; do
  [ -z "$line" ] && continue
  echo "$line"
  bad=$((bad + 1))
done <<< "$literals"
if [ "$bad" -ne 0 ]; then
  echo "FAIL: $bad include(s) of a backend's file, backend name literal(s) or identifier(s) in $files device_mesh files"
  exit 1
fi
echo "ok: $files device_mesh files include comm's front headers only and name no backend in a string literal or identifier"
