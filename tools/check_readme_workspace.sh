#!/usr/bin/env bash
# Follows the README's "Use it from your workspace" as a new user would: makes
# a fresh workspace in a temporary directory from the README's own blocks
# (the WORKSPACE, .bazelrc and BUILD lines, with /path/to/devmesh replaced by
# this checkout, and hello.cc), then runs the README's two commands:
#   bazel build -c opt //:hello
#   bazel run @devmesh//bootstrap:launch -- --nproc=4 -- bazel-bin/hello
# and checks that 4 ranks each printed their exact tp sum (ranks 0, 1: 1;
# ranks 2, 3: 5). Nothing is copied from examples/: what the README says is
# what runs. Shuts its Bazel server down and removes the workspace on exit.
# Every step is bounded by `timeout`. Exit 0 when all passed.
set -uo pipefail
DEVMESH="$(cd "$(dirname "$0")/.." && pwd)"
WS="$(mktemp -d /tmp/readme_workspace.XXXXXX)"
cleanup() {
  (cd "$WS" && timeout 300 bazel shutdown >/dev/null 2>&1) || true
  rm -rf "$WS"
}
trap cleanup EXIT

python3 - "$DEVMESH/README.md" "$WS" "$DEVMESH" <<'PY' || exit 1
import re, sys, os
readme, ws, devmesh = sys.argv[1:]
text = open(readme).read()
section = text.split("## Use it from your workspace", 1)[1].split("\n## ", 1)[0]
blocks = re.findall(r"```([\w+]+)\n(.*?)```", section, re.S)
py = [b for lang, b in blocks if lang == "python"]
cc = [b for lang, b in blocks if lang == "c++"]
if len(py) != 1 or len(cc) != 1:
    sys.exit("check_readme_workspace: want one python and one c++ block in "
             "the README's section, found %d and %d" % (len(py), len(cc)))
files, current = {}, None
for line in py[0].splitlines():
    m = re.match(r"# (WORKSPACE|\.bazelrc|BUILD)$", line.strip())
    if m:
        current = m.group(1)
        files[current] = []
    elif current:
        files[current].append(line.replace("/path/to/devmesh", devmesh))
if set(files) != {"WORKSPACE", ".bazelrc", "BUILD"}:
    sys.exit("check_readme_workspace: the python block names %s, not "
             "WORKSPACE, .bazelrc and BUILD" % sorted(files))
for name, lines in files.items():
    with open(os.path.join(ws, name), "w") as f:
        f.write("\n".join(lines).strip() + "\n")
with open(os.path.join(ws, "hello.cc"), "w") as f:
    f.write(cc[0])
PY

cd "$WS"
echo "check_readme_workspace: workspace $WS"
if ! timeout 1800 bazel build -c opt //:hello >build.log 2>&1; then
  tail -30 build.log; echo "FAIL: bazel build -c opt //:hello"; exit 1
fi
timeout 600 bazel run @devmesh//bootstrap:launch -- --nproc=4 -- bazel-bin/hello \
  >run.log 2>&1
rc=$?
status=0
for r in 0 1 2 3; do
  want=$([ $r -lt 2 ] && echo 1 || echo 5)
  if ! grep -qE "rank $r of .*: tp sum $want\$" run.log; then
    echo "FAIL: rank $r did not print 'tp sum $want'"; status=1
  fi
done
[ $rc -eq 0 ] || { echo "FAIL: the launcher exited $rc"; status=1; }
if [ $status -ne 0 ]; then tail -20 run.log; exit 1; fi
grep -E "tp sum" run.log | sed 's/^/  /'
echo "PASS: the README's workspace builds and its 4 ranks print their exact tp sums"
