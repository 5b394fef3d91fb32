#!/usr/bin/env python3
"""Checks the commands and links of README.md and docs/ against the tree.

What is read:
  * every ```sh block of README.md, docs/guides/*.md and docs/*.md (a line
    ending in a backslash continues; `#` starts a comment; a `host0$ ` prompt, `sudo`,
    `timeout N`, `env`, `bash` and NAME=value words before a command are
    skipped; `[--flag]` counts as `--flag`);
  * every relative Markdown link `[text](path)` and image `![..](path)` of
    README.md and docs/**/*.md, outside code.

What fails (each reported as file:line):
  1. `bazel run|test|build [bazel flags] LABEL...`: a label `//pkg:name` (or
     `//pkg`, meaning `//pkg:pkg`) whose pkg/BUILD.bazel does not define
     `name = "name"` (or, for `[rule(name = name, ...) for name, ... in
     [("a", ...), ...]]`, name the first string of a tuple); `//pkg/...`
     needs the directory, `//...` always passes.
     `--config=X` must be a config of .bazelrc (`build:X` or `test:X`).
  2. A path word starting with `tools/` or `fuzz/` (anywhere in a command
     line) that does not exist in the checkout; `bazel-bin/pkg/name` must be
     a target //pkg:name.
  3. A `--flag` given to a devmesh binary: after `--` of `bazel run LABEL`,
     after `bazel-bin/pkg/name`, or inside `--test_arg=--flag` of `bazel
     test LABEL`. The flag must be defined by ABSL_FLAG(type, flag, ...), or
     spelled as a C string literal "--flag (a main() that parses its own
     argv), in a source of that target or of a target it depends on inside
     devmesh
     (string literals of the rule that start with `//` or `:`, followed
     transitively); `--benchmark_*` flags pass when a dependency is Google
     Benchmark. A second `--` (the launcher's `-- program args`) ends the
     binary's flags, and what follows is checked as a command of its own.
  4. A `--flag` given to a script `tools/*.sh` or `fuzz/*.sh`: the script
     must name it as a `case` pattern (`--flag)`, `--flag=*)`, or an
     alternative of `a|--flag=*)`). Other files under tools/ are checked for
     existence only.
  5. A relative link whose file is missing, or whose `#anchor` names no
     heading of the Markdown file it points to (GitHub's slugs).
  6. A guide docs/guides/*.md that README.md does not link to (the README's
     map of the guides names every one).

A block preceded by the line `<!-- doc-commands: another workspace -->`
runs in the user's own workspace: its `//` labels and `bazel-bin/` paths are
the user's and are not checked, but `@devmesh//` labels and their flags are.
Commands of other programs (torchrun, mpirun, srun, python ...) are not
checked, except for rule 2.

The checkout is found through README.md's runfile, a link into the source
tree (DEVMESH_DOCS_ROOT overrides it). Before checking the docs, the test
checks itself: a few broken commands and links of each kind, embedded
below, must each be reported, so that a checker that lost its teeth fails.
"""
import glob
import os
import re
import shlex
import sys

MARKER = "<!-- doc-commands: another workspace -->"


def find_root():
    if os.environ.get("DEVMESH_DOCS_ROOT"):
        return os.environ["DEVMESH_DOCS_ROOT"]
    here = os.path.dirname(os.path.abspath(__file__))
    readme = os.path.join(here, "..", "..", "README.md")
    return os.path.dirname(os.path.realpath(readme))


class Tree:
    """BUILD files, sources, scripts and .bazelrc of one checkout."""

    def __init__(self, root):
        self.root = root
        self._rules = {}
        self._flags = {}
        rc = self.read(".bazelrc") or ""
        self.configs = set(re.findall(r"^\w+:(\S+)", rc, re.M))

    def read(self, rel):
        try:
            with open(os.path.join(self.root, rel), encoding="utf-8") as f:
                return f.read()
        except (OSError, UnicodeDecodeError):
            return None

    def exists(self, rel):
        return os.path.exists(os.path.join(self.root, rel))

    def rules(self, pkg):
        """name -> rule text of pkg's BUILD file (None: no BUILD file)."""
        if pkg not in self._rules:
            text = self.read(os.path.join(pkg, "BUILD.bazel"))
            if text is None:
                text = self.read(os.path.join(pkg, "BUILD"))
            rules = None
            if text is not None:
                rules = {}
                starts = [m.start()
                          for m in re.finditer(r"^\[?\w+\(", text, re.M)]
                for i, s in enumerate(starts):
                    chunk = text[s:starts[i + 1] if i + 1 < len(starts) else None]
                    m = re.search(r'\bname\s*=\s*"([^"]+)"', chunk)
                    if m:
                        rules[m.group(1)] = chunk
                    elif re.search(r"\bname\s*=\s*name\b", chunk):
                        # [rule(name = name, ...) for name, ... in [("a", ...)]]
                        tail = chunk[chunk.rindex(" for "):]
                        for n in re.findall(r'\(\s*"([^"]+)"', tail):
                            rules[n] = chunk
            self._rules[pkg] = rules
        return self._rules[pkg]

    @staticmethod
    def split_label(label):
        """'//pkg:name' -> (pkg, name); '//pkg' -> (pkg, last part)."""
        body = label[2:]
        if ":" in body:
            pkg, name = body.split(":", 1)
        else:
            pkg, name = body, body.rsplit("/", 1)[-1]
        return pkg, name

    def check_label(self, label):
        """None when label names a target of this tree, else why not."""
        if label in ("//...", "//:all"):
            return None
        if label.endswith("/..."):
            pkg = label[2:-4]
            return None if os.path.isdir(os.path.join(self.root, pkg)) else (
                f"{label}: no directory {pkg}/")
        pkg, name = self.split_label(label)
        rules = self.rules(pkg)
        if rules is None:
            return f"{label}: no {pkg or '.'}/BUILD.bazel"
        if name not in rules and name != "all":
            return f'{label}: {pkg or "."}/BUILD.bazel defines no name = "{name}"'
        return None

    def flags(self, label):
        """(flags defined for the binary, whether Google Benchmark's apply)."""
        if label in self._flags:
            return self._flags[label]
        seen, todo = set(), [label]
        names, bench = set(), False
        while todo:
            lab = todo.pop()
            if lab in seen:
                continue
            seen.add(lab)
            pkg, name = self.split_label(lab)
            rule = (self.rules(pkg) or {}).get(name)
            if rule is None:
                continue
            for s in re.findall(r'"([^"]+)"', rule):
                if "google_benchmark" in s:
                    bench = True
                if s.startswith("//") or s.startswith(":"):
                    dep = f"//{pkg}{s}" if s.startswith(":") else s
                    dpkg, dname = self.split_label(dep)
                    if re.search(r"\.(cc|h|c|cpp)$", dname):
                        src = self.read(os.path.join(dpkg, dname)) or ""
                        names |= set(_absl_flags(src))
                    else:
                        todo.append(dep)
                elif re.search(r"\.(cc|h|c|cpp)$", s):
                    src = self.read(os.path.join(pkg, s)) or ""
                    names |= set(_absl_flags(src))
        self._flags[label] = (names, bench)
        return self._flags[label]

    def script_flags(self, rel):
        text = self.read(rel) or ""
        names = set()
        for line in text.splitlines():
            m = re.match(r"\s*([^\s()]+)\)", line)
            if not m:
                continue
            for alt in m.group(1).split("|"):
                alt = alt.strip("'\"")
                fm = re.fullmatch(r"--([A-Za-z0-9_-]+)(=\*|\*)?", alt)
                if fm:
                    names.add(fm.group(1))
        return names


def _absl_flags(src):
    """ABSL_FLAG(type, name, ...) names, and "--name literals of a main()
    that parses its own argv (bench/store_ops.cc)."""
    return (re.findall(r"\bABSL_FLAG\(\s*[^,]+?,\s*(\w+)\s*,", src) +
            re.findall(r'"--([A-Za-z0-9_]+)', src))


def flag_name(token):
    m = re.match(r"--([A-Za-z0-9_-]+)", token)
    return m.group(1) if m else None


class Checker:
    def __init__(self, tree):
        self.tree = tree
        self.errors = []
        self.counts = {"commands": 0, "labels": 0, "paths": 0, "flags": 0,
                       "links": 0}

    def err(self, where, msg):
        self.errors.append(f"{where}: {msg}")

    # ---- sh blocks ------------------------------------------------------
    def check_markdown_commands(self, rel, text):
        lines = text.splitlines()
        i = 0
        while i < len(lines):
            if lines[i].strip() == "```sh":
                prev = next((l.strip() for l in reversed(lines[:i]) if l.strip()), "")
                other = prev == MARKER
                j = i + 1
                logical, start = "", None
                while j < len(lines) and lines[j].strip() != "```":
                    raw = lines[j]
                    if start is None:
                        start = j + 1
                    if raw.rstrip().endswith("\\"):
                        logical += raw.rstrip()[:-1] + " "
                    else:
                        self.check_line(f"{rel}:{start}", logical + raw, other)
                        logical, start = "", None
                    j += 1
                if j == len(lines):
                    self.err(f"{rel}:{i + 1}", "a ```sh block is not closed")
                i = j
            i += 1

    def check_line(self, where, line, other):
        line = re.sub(r"^\s*\S+\$\s+", "", line)  # a `host0$ ` prompt
        line = re.sub(r"(^|\s)#.*$", "", line)  # a comment
        if not line.strip():
            return
        try:
            words = shlex.split(line)
        except ValueError:
            words = line.split()
        words = [w.strip("[]") for w in words]
        for w in words:  # rule 2, anywhere on the line
            m = re.match(r"(?:\./)?((?:tools|fuzz)/[A-Za-z0-9_./-]+)", w)
            if m and not re.search(r"[=*]", w.split("/", 1)[0]):
                path = m.group(1).rstrip(".,;:")
                self.counts["paths"] += 1
                if not self.tree.exists(path):
                    self.err(where, f"{path}: no such file in the checkout")
        cmd = []
        for w in words + [";"]:
            if w in ("&&", "||", ";", "|"):
                if cmd:
                    self.check_command(where, cmd, other)
                cmd = []
            else:
                cmd.append(w)

    def check_command(self, where, words, other):
        while words and (words[0] in ("sudo", "env", "bash", "exec") or
                         re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0])):
            words = words[1:]
        if words and words[0] == "timeout":
            words = words[2:]
        if not words:
            return
        prog = words[0]
        if prog == "bazel":
            self.counts["commands"] += 1
            self.check_bazel(where, words[1:], other)
        elif prog.startswith("bazel-bin/"):
            if other:
                return
            self.counts["commands"] += 1
            rel = prog[len("bazel-bin/"):]
            pkg, _, name = rel.rpartition("/")
            label = f"//{pkg}:{name}"
            self.counts["labels"] += 1
            why = self.tree.check_label(label)
            if why:
                self.err(where, f"{prog}: {why}")
                return
            self.check_binary_args(where, label, words[1:], other)
        elif re.match(r"(\./)?(tools|fuzz)/", prog):
            self.counts["commands"] += 1
            path = prog[2:] if prog.startswith("./") else prog
            if path.endswith(".sh") and self.tree.exists(path):
                known = self.tree.script_flags(path)
                for w in words[1:]:
                    name = flag_name(w)
                    if name:
                        self.counts["flags"] += 1
                        if name not in known:
                            self.err(where, f"{path} has no flag --{name}")

    def check_bazel(self, where, args, other):
        i = 0
        while i < len(args) and args[i].startswith("-"):
            i += 1  # startup options
        if i >= len(args) or args[i] not in ("run", "test", "build"):
            return
        verb, rest = args[i], args[i + 1:]
        targets, test_args, after = [], [], None
        k = 0
        while k < len(rest):
            w = rest[k]
            if w == "--":
                after = rest[k + 1:]
                break
            if w in ("-c", "--compilation_mode"):
                k += 2
                continue
            if w.startswith("--config="):
                cfg = w.split("=", 1)[1]
                if cfg not in self.tree.configs:
                    self.err(where, f"--config={cfg}: not a config of .bazelrc")
            elif w.startswith("--test_arg="):
                test_args.append(w.split("=", 1)[1])
            elif w.startswith("//") or w.startswith("@devmesh//"):
                targets.append(w)
            k += 1
        for t in targets:
            label = t[len("@devmesh"):] if t.startswith("@devmesh//") else t
            if other and not t.startswith("@devmesh//"):
                continue
            self.counts["labels"] += 1
            why = self.tree.check_label(label)
            if why:
                self.err(where, why)
                continue
            if verb == "run" and after is not None:
                self.check_binary_args(where, label, after, other)
            if test_args:
                self.check_binary_args(where, label, test_args, other)

    def check_binary_args(self, where, label, args, other):
        known, bench = self.tree.flags(label)
        for k, w in enumerate(args):
            if w == "--":
                self.check_command(where, args[k + 1:], other)
                return
            name = flag_name(w)
            if not name:
                continue
            self.counts["flags"] += 1
            if name in known or (bench and name.startswith("benchmark_")):
                continue
            self.err(where, f"{label} defines no flag --{name} (ABSL_FLAG in "
                     "its sources or its devmesh dependencies)")

    # ---- links ----------------------------------------------------------
    def check_markdown_links(self, rel, text):
        code = re.compile(r"```.*?```", re.S)
        stripped = code.sub(lambda m: "\n" * m.group(0).count("\n"), text)
        stripped = re.sub(r"`[^`\n]*`", "``", stripped)
        for m in re.finditer(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", stripped):
            target = m.group(1)
            if re.match(r"[a-z]+:", target):
                continue  # http:, https:, mailto:
            line = stripped.count("\n", 0, m.start()) + 1
            where = f"{rel}:{line}"
            self.counts["links"] += 1
            path, _, anchor = target.partition("#")
            base = os.path.dirname(rel)
            dest = os.path.normpath(os.path.join(base, path)) if path else rel
            if not self.tree.exists(dest):
                self.err(where, f"link ({target}): {dest} does not exist")
                continue
            if anchor and dest.endswith(".md"):
                if anchor not in slugs(self.tree.read(dest) or ""):
                    self.err(where, f"link ({target}): {dest} has no heading "
                             f"#{anchor}")


def slugs(text):
    """GitHub's heading anchors of a Markdown text."""
    out, count = set(), {}
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    for m in re.finditer(r"^#{1,6}\s+(.*?)\s*#*\s*$", text, re.M):
        s = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
        n = count.get(s, 0)
        count[s] = n + 1
        out.add(s if n == 0 else f"{s}-{n}")
    return out


SELF_CHECK = [
    # (a broken command or link, what the report must say)
    ("bazel run //bench:no_such_benchmark", "no_such_benchmark"),
    ("bazel test //no_such_package/...", "no directory"),
    ("bazel build -c opt //tests/readme:tour_test //store:no_such", "no_such"),
    ("bazel run //store:server -- --port=0 --no_such_flag=1", "--no_such_flag"),
    ("bazel test //tests/readme:tour_test --test_arg=--no_such_flag",
     "--no_such_flag"),
    ("bazel test --config=no_such_config //...", "no_such_config"),
    ("tools/no_such_script.sh --x", "no_such_script"),
    ("bash tools/recovery_bench.sh --trials=2 --no_such_flag", "--no_such_flag"),
    ("bazel-bin/bootstrap/launch --nproc=2 -- bazel-bin/store/server --nope",
     "--nope"),
    ("bazel-bin/bench/no_such_binary", "no_such_binary"),
]


def self_check(tree):
    failures = []
    for line, want in SELF_CHECK:
        c = Checker(tree)
        c.check_line("self-check", line, other=False)
        if not any(want in e for e in c.errors):
            failures.append(f"self-check: '{line}' was not reported ({want})")
    # Good commands of each kind pass.
    for line in ("bazel run //store:server -- --port=0 --bind=127.0.0.1",
                 "bazel run -c opt //bench:allreduce_2d -- --iters=2 "
                 "--benchmark_out=/tmp/x.json",
                 "tools/peer_bench.sh --short",
                 "bazel test //tests/readme/... //tests/docs:all"):
        c = Checker(tree)
        c.check_line("self-check", line, other=False)
        if c.errors:
            failures.append(f"self-check: '{line}' was reported: {c.errors}")
    c = Checker(tree)
    c.check_markdown_links("README.md", "[a](docs/no_such.md) "
                           "[b](docs/guides/store.md#no-such-heading)")
    if len(c.errors) != 2:
        failures.append(f"self-check: broken links not both reported: {c.errors}")
    return failures


def main():
    root = find_root()
    tree = Tree(root)
    failures = self_check(tree)
    checker = Checker(tree)
    guides = sorted(
        os.path.relpath(p, root)
        for p in glob.glob(os.path.join(root, "docs", "guides", "*.md")))
    # The guides, then the pages they link to (docs/*.md: figures with the
    # commands that made them).
    command_files = ["README.md"] + guides + sorted(
        os.path.relpath(p, root)
        for p in glob.glob(os.path.join(root, "docs", "*.md")))
    link_files = ["README.md"] + sorted(
        os.path.relpath(p, root)
        for p in glob.glob(os.path.join(root, "docs", "**", "*.md"),
                           recursive=True))
    for rel in command_files:
        checker.check_markdown_commands(rel, tree.read(rel) or "")
    for rel in link_files:
        checker.check_markdown_links(rel, tree.read(rel) or "")
    readme = tree.read("README.md") or ""
    for rel in guides:
        if f"]({rel})" not in readme:
            failures.append(f"README.md: the map of the guides has no link "
                            f"to {rel}")
    failures += checker.errors
    c = checker.counts
    print(f"doc_commands_test: {root}: {len(command_files)} files with "
          f"commands, {len(link_files)} with links; checked {c['commands']} "
          f"commands, {c['labels']} labels, {c['paths']} paths, {c['flags']} "
          f"flags, {c['links']} links")
    if min(c["commands"], c["labels"], c["flags"], c["links"]) == 0:
        failures.append("nothing of some kind was checked: the parser is broken")
    for f in failures:
        print("FAIL:", f)
    print("1 passed, 0 failed" if not failures else "0 passed, 1 failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
