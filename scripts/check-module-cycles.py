#!/usr/bin/env python3
"""Lists the module edges inside each crate of the workspace and fails on a cycle, or on an
import that points up across the floors a crate root declares.

    scripts/check-module-cycles.py              # every cycle and upward import, exit 1 if any
    scripts/check-module-cycles.py --edges      # also every edge, with where it comes from
    scripts/check-module-cycles.py --crate dlock-core --crate dlock-macros
    scripts/check-module-cycles.py --self-test  # a fake crate with and without a cycle

"Every import points down" is the rule this checks: a module may use the modules below it,
never one that (through others) uses it back. An edge `a.rs -> b.rs` means code in `a.rs`
names something defined in `b.rs`, through any of:

* `use crate::…`, `use super::…`, `use self::…`, `use child::…` (and `pub use`, any
  visibility, nested `{…}` trees, `as` renames);
* paths in code: `crate::a::b::f()`, `super::x::Y`, `self::child::Z`, `child::f()` where
  `child` is a module declared in the current one (`$crate::` in `macro_rules!` too).

A path resolves to the file that defines its last module: `crate::a::b::Item` is `a/b.rs` or
`a/b/mod.rs` when `b` is a module, `a.rs` (or `a/mod.rs`) when `b` is an item, and the file
holding an inline `mod` for inline modules. An item imported into a module by a `use` (such as
a `pub use` re-export in lib.rs) resolves to where that `use` points, so `crate::Error` counts
as an edge to `error.rs`, not to lib.rs. Edges to a crate root (lib.rs, main.rs, bin/*.rs)
are not counted: everything is reachable from there, that is what a root is for.

Not counted: comments and doc comments, string/char literals, code inside `#[cfg(test)]`
modules (inline or files: tests may reach anywhere), tokens inside `quote!`-like macros
(`quote!`, `quote_spanned!`, `parse_quote!`, `parse_quote_spanned!`: that is generated code,
not this crate's), and `pub(in path)` visibilities. Cargo features are ignored: a module behind
`#[cfg(feature = …)]` is checked like any other.

Crates are the `[workspace] members` of the root Cargo.toml (globs included, `exclude`
honoured); each one's module trees start at src/lib.rs, src/main.rs, src/bin/*.rs,
src/bin/*/main.rs and any `[lib]`/`[[bin]]` `path` of its Cargo.toml.

Floors: a crate root may declare its floors in its docs, as a section `# Layout` whose
markdown table names, row by row from the top floor down, the crate's top-level modules
(backticked: `kinds/` for a folder, `error.rs` for a file; several on one row share a floor).
Then every top-level module must be named on exactly one row (a name the tree does not have
fails too), and every edge must point into its own floor or a lower one: an import from a
lower floor up to a higher one fails (`UPWARD`), named with its file:line and code, even
where it makes no cycle. The crate root itself stands above every floor.

Output: one line per crate; with --edges, each edge and its first occurrence; for each
group of modules that import each other (a strongly connected component), the shortest cycle
through each of its edges, every hop with its file:line and code. Exit status: 0 without
cycles, 1 with, 2 on a usage or I/O error. Python 3 standard library only.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile
from collections import deque
from dataclasses import dataclass, field

try:  # Python >= 3.11
    import tomllib
except ImportError:  # pragma: no cover - older Pythons: a small reader for what we need
    tomllib = None

QUOTE_MACROS = {"quote", "quote_spanned", "parse_quote", "parse_quote_spanned"}
PATH_STARTS = {"crate", "$crate", "super", "self"}
ITEM_KEYWORDS = {"fn", "struct", "enum", "trait", "type", "const", "static", "union"}
# Keywords after which a pending `#[cfg(test)]` no longer applies to a `mod`.
ITEM_ENDS = ITEM_KEYWORDS | {"impl", "use", "extern", "macro_rules", "let"}

# --------------------------------------------------------------------------------------------
# Lexer: just enough Rust to drop comments and literals and keep identifiers and punctuation.


@dataclass
class Tok:
    kind: str  # "ident", "punct", "lit", "life"
    text: str
    line: int


def lex(src: str) -> list[Tok]:
    toks: list[Tok] = []
    i, n, line = 0, len(src), 1

    def skip_string(j: int) -> int:
        """`j` is just past the opening quote of a "…" string; returns the index past its end."""
        nonlocal line
        while j < n:
            c = src[j]
            if c == "\\":
                if j + 1 < n and src[j + 1] == "\n":
                    line += 1
                j += 2
                continue
            if c == "\n":
                line += 1
            if c == '"':
                return j + 1
            j += 1
        return n

    def skip_raw_string(j: int) -> int:
        """`j` is at the `#`s or the quote after `r`; returns the index past the end."""
        nonlocal line
        hashes = 0
        while j < n and src[j] == "#":
            hashes += 1
            j += 1
        if j >= n or src[j] != '"':
            return j
        end = '"' + "#" * hashes
        k = src.find(end, j + 1)
        if k < 0:
            k = n
        line += src.count("\n", j, k)
        return min(n, k + len(end))

    while i < n:
        c = src[i]
        if c == "\n":
            line += 1
            i += 1
        elif c.isspace():
            i += 1
        elif src.startswith("//", i):
            k = src.find("\n", i)
            i = n if k < 0 else k
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    if src[j] == "\n":
                        line += 1
                    j += 1
            i = j
        elif c == '"':
            start = line
            i = skip_string(i + 1)
            toks.append(Tok("lit", '""', start))
        elif c == "'":
            # A char literal ('a', '\n', '\u{1F600}', '"') or a lifetime/label ('a, 'static).
            if i + 1 < n and src[i + 1] == "\\":
                j = i + 1
                while j < n and src[j] != "'":
                    j += 2 if src[j] == "\\" else 1
                toks.append(Tok("lit", "''", line))
                i = j + 1
            elif i + 2 < n and src[i + 2] == "'":
                toks.append(Tok("lit", "''", line))
                i += 3
            else:
                j = i + 1
                while j < n and (src[j].isalnum() or src[j] == "_"):
                    j += 1
                toks.append(Tok("life", src[i:j], line))
                i = j
        elif c.isalpha() or c == "_":
            # String prefixes first: r"…", r#"…"#, b"…", br"…", c"…", cr#"…"#, b'x'.
            m = re.match(r"(br|cr|r|b|c)(?=[\"'#])", src[i : i + 3])
            if m:
                prefix, j = m.group(1), i + len(m.group(1))
                if prefix.endswith("r") and j < n and src[j] in '#"':
                    if src[j] == "#" and not (j + 1 < n and src[j + 1] in '#"'):
                        # `r#ident`: a raw identifier.
                        k = j + 1
                        while k < n and (src[k].isalnum() or src[k] == "_"):
                            k += 1
                        toks.append(Tok("ident", src[j + 1 : k], line))
                        i = k
                        continue
                    start = line
                    i = skip_raw_string(j)
                    toks.append(Tok("lit", '""', start))
                    continue
                if prefix in ("b", "c") and src[j] == '"':
                    start = line
                    i = skip_string(j + 1)
                    toks.append(Tok("lit", '""', start))
                    continue
                if prefix == "b" and src[j] == "'":
                    k = j + 1
                    while k < n and src[k] != "'":
                        k += 2 if src[k] == "\\" else 1
                    toks.append(Tok("lit", "''", line))
                    i = k + 1
                    continue
            j = i
            while j < n and (src[j].isalnum() or src[j] == "_"):
                j += 1
            toks.append(Tok("ident", src[i:j], line))
            i = j
        elif c.isdigit():
            j = i
            while j < n and (src[j].isalnum() or src[j] == "_"):
                j += 1
            toks.append(Tok("lit", src[i:j], line))
            i = j
        elif src.startswith("::", i):
            toks.append(Tok("punct", "::", line))
            i += 2
        elif c == "$" and src.startswith("$crate", i) and not (
            i + 6 < n and (src[i + 6].isalnum() or src[i + 6] == "_")
        ):
            toks.append(Tok("ident", "$crate", line))
            i += 6
        else:
            toks.append(Tok("punct", c, line))
            i += 1
    return toks


# --------------------------------------------------------------------------------------------
# One file: module declarations, `use` trees, inline paths and the items it defines.


@dataclass
class Ref:
    """A path found in a file: resolved later, once every module is known."""

    module: tuple[str, ...]  # the module the path is written in (inline modules included)
    segments: list[str]
    line: int
    code: str  # as written, for the report
    kind: str  # "use" or "path"


@dataclass
class Module:
    path: tuple[str, ...]
    file: str
    parent: "Module | None"
    test: bool = False
    children: dict[str, "Module"] = field(default_factory=dict)
    # name -> the `use` path that binds it here (`pub use a::Thing` binds `Thing`).
    imports: dict[str, list[str]] = field(default_factory=dict)
    globs: list[list[str]] = field(default_factory=list)
    items: set[str] = field(default_factory=set)


def matching(toks: list[Tok], i: int) -> int:
    """Index of the delimiter closing the one at `i`."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    opener = toks[i].text
    closer = pairs[opener]
    depth = 0
    for j in range(i, len(toks)):
        t = toks[j]
        if t.kind != "punct":
            continue
        if t.text == opener:
            depth += 1
        elif t.text == closer:
            depth -= 1
            if depth == 0:
                return j
    return len(toks) - 1


def parse_use_tree(toks: list[Tok], prefix: list[str]):
    """(segments, the name it binds or None, is a glob) for each leaf of one `use` tree."""
    if toks and toks[0].text == "::" and not prefix:
        return []  # `use ::other_crate::…`
    segs = list(prefix)
    i = 0
    while i < len(toks):
        t = toks[i]
        if t.kind == "punct" and t.text == "{":
            end = matching(toks, i)
            inner, start, depth, out = toks[i + 1 : end], 0, 0, []
            for k, u in enumerate(inner + [Tok("punct", ",", 0)]):
                if u.kind == "punct" and u.text in "({[":
                    depth += 1
                elif u.kind == "punct" and u.text in ")}]":
                    depth -= 1
                elif u.text == "," and depth == 0:
                    if k > start:
                        out.extend(parse_use_tree(inner[start:k], segs))
                    start = k + 1
            return out
        if t.text == "*":
            return [(segs, None, True)]
        if t.kind == "ident":
            segs = segs + [t.text]
            i += 1
            if i < len(toks) and toks[i].text == "::":
                i += 1
                continue
            name = segs[-2] if segs[-1] == "self" and len(segs) > 1 else segs[-1]
            if i + 1 < len(toks) and toks[i].text == "as":
                name = None if toks[i + 1].text == "_" else toks[i + 1].text
            return [(segs, name, False)]
        i += 1
    return []


def cfg_test(attr: list[Tok]) -> bool:
    """`#[cfg(test)]`, `#[cfg(all(test, …))]`: the item exists only in unit tests."""
    words = [t.text for t in attr if t.kind == "ident"]
    return bool(words) and words[0] == "cfg" and "test" in words and "not" not in words


def attr_path(attr: list[Tok], src: str) -> str | None:
    """The value of `#[path = "…"]` (literals were dropped by the lexer: read it from `src`)."""
    if attr and attr[0].text == "path":
        lines = src.splitlines()
        line = lines[attr[0].line - 1] if attr[0].line - 1 < len(lines) else ""
        m = re.search(r'#\[\s*path\s*=\s*"([^"]*)"', line)
        if m:
            return m.group(1)
    return None


@dataclass
class FileScan:
    mods: list[tuple[tuple[str, ...], str, bool, str | None]]  # (parent path, name, test, #[path])
    inline: list[tuple[tuple[str, ...], str, bool]]  # (parent path, name, test)
    refs: list[Ref]
    uses: list[tuple[tuple[str, ...], list[str], str | None, bool]]
    items: list[tuple[tuple[str, ...], str]]


def scan_file(src: str, module: tuple[str, ...], test: bool) -> FileScan:
    toks = lex(src)
    scan = FileScan([], [], [], [], [])
    # Stack of (closing index, module path, in test code) for inline modules.
    stack: list[tuple[int, tuple[str, ...], bool]] = []
    here, in_test = module, test
    pending_test, pending_path = False, None
    i, n = 0, len(toks)

    def code_of(a: int, b: int) -> str:
        """The path as written, for the report (`crate::a::b`)."""
        return "".join(t.text for t in toks[a:b])

    while i < n:
        while stack and i > stack[-1][0]:
            stack.pop()
            here, in_test = (stack[-1][1], stack[-1][2]) if stack else (module, test)
        t = toks[i]
        prev = toks[i - 1] if i else None
        if t.kind == "punct" and t.text == "#":
            j = i + 1
            if j < n and toks[j].text == "!":
                j += 1
            if j < n and toks[j].text == "[":
                end = matching(toks, j)
                attr = toks[j + 1 : end]
                if cfg_test(attr):
                    pending_test = True
                pending_path = attr_path(attr, src) or pending_path
            i += 1
            continue
        if t.kind == "ident" and t.text == "mod" and i + 2 < n and toks[i + 1].kind == "ident":
            name, after = toks[i + 1].text, toks[i + 2].text
            if after == ";":
                scan.mods.append((here, name, in_test or pending_test, pending_path))
                scan.items.append((here, name))
                pending_test, pending_path = False, None
                i += 3
                continue
            if after == "{":
                child = here + (name,)
                child_test = in_test or pending_test
                scan.inline.append((here, name, child_test))
                scan.items.append((here, name))
                stack.append((matching(toks, i + 2), child, child_test))
                here, in_test = child, child_test
                pending_test, pending_path = False, None
                i += 3
                continue
        if t.kind == "ident" and t.text in ITEM_ENDS:
            pending_test, pending_path = False, None
        if t.kind == "punct" and t.text in ";{}":
            pending_test, pending_path = False, None
        # Generated code: skip `quote!{…}` and friends.
        if (
            t.kind == "ident"
            and t.text in QUOTE_MACROS
            and i + 2 < n
            and toks[i + 1].text == "!"
            and toks[i + 2].text in "({["
        ):
            i = matching(toks, i + 2) + 1
            continue
        # `pub(in crate::a)`: a visibility, not a dependency.
        if t.text == "pub" and i + 2 < n and toks[i + 1].text == "(" and toks[i + 2].text == "in":
            i = matching(toks, i + 1) + 1
            continue
        # Items defined here, for glob re-exports.
        if t.kind == "ident" and t.text in ITEM_KEYWORDS | {"macro_rules"} and i + 1 < n:
            k = i + 1
            if t.text == "macro_rules" and k < n and toks[k].text == "!":
                k += 1
            if k < n and toks[k].kind == "ident" and toks[k].text != "_":
                scan.items.append((here, toks[k].text))
        # `use` declarations (not `impl Trait + use<'a>`).
        if (
            t.kind == "ident"
            and t.text == "use"
            and i + 1 < n
            and toks[i + 1].text != "<"
            and not (prev and prev.text == "::")
        ):
            j = i + 1
            depth = 0
            while j < n and not (toks[j].text == ";" and depth == 0):
                if toks[j].kind == "punct" and toks[j].text in "({[":
                    depth += 1
                elif toks[j].kind == "punct" and toks[j].text in ")}]":
                    depth -= 1
                j += 1
            tree = toks[i + 1 : j]
            for segs, binding, is_glob in parse_use_tree(tree, []):
                scan.uses.append((here, segs, binding, is_glob))
                if not in_test:
                    named = segs[:-1] if segs[-1:] == ["self"] else segs
                    shown = "use " + "::".join(named) + ("::*" if is_glob else "")
                    scan.refs.append(Ref(here, segs, t.line, shown, "use"))
            i = j + 1
            continue
        # A path in code: `crate::…`, `super::…`, `self::…`, or `name::…` (resolved later,
        # kept only if `name` is a child module).
        if (
            t.kind == "ident"
            and i + 2 < n
            and toks[i + 1].text == "::"
            and toks[i + 2].kind == "ident"
            and not (prev and prev.text == "::")
        ):
            segs, j = [t.text], i + 1
            while j + 1 < n and toks[j].text == "::" and toks[j + 1].kind == "ident":
                segs.append(toks[j + 1].text)
                j += 2
            if not in_test:
                scan.refs.append(Ref(here, segs, t.line, code_of(i, j), "path"))
            i = j
            continue
        i += 1
    return scan


# --------------------------------------------------------------------------------------------
# A crate: its module tree, then the edges between files.


@dataclass
class Edge:
    src: str
    dst: str
    refs: list[Ref]


class Crate:
    def __init__(self, name: str, directory: str, roots: list[str]):
        self.name = name
        self.dir = directory
        self.roots = [os.path.normpath(r) for r in roots]
        self.modules: dict[tuple[str, str], Module] = {}  # (root, module path) -> Module
        self.refs: list[tuple[Module, Ref]] = []
        self.warnings: list[str] = []
        self.files: set[str] = set()
        for root in self.roots:
            self.load(root)

    def rel(self, path: str) -> str:
        return os.path.relpath(path, os.path.join(self.dir, "src")) if path.startswith(
            os.path.join(self.dir, "src") + os.sep
        ) else os.path.relpath(path, self.dir)

    def load(self, root: str) -> None:
        top = Module((), root, None)
        queue = deque([(top, root)])
        while queue:
            module, path = queue.popleft()
            try:
                with open(path, encoding="utf-8") as f:
                    src = f.read()
            except OSError as e:
                self.warnings.append(f"cannot read {path}: {e}")
                continue
            self.files.add(path)
            scan = scan_file(src, module.path, module.test)
            base = module.path
            # Every module of this file (the file's own and its inline ones).
            local = {base: module}
            for parent, name, test in scan.inline:
                owner = local[parent]
                child = Module(parent + (name,), path, owner, test=test)
                owner.children[name] = child
                local[child.path] = child
            for parent, name in scan.items:
                local[parent].items.add(name)
            for here, segs, binding, is_glob in scan.uses:
                owner = local[here]
                if is_glob:
                    owner.globs.append(segs)
                elif binding:
                    owner.imports[binding] = segs
            for ref in scan.refs:
                self.refs.append((local[ref.module], ref))
            # Files of the declared modules: `a/b.rs` or `a/b/mod.rs`, beside a root or mod.rs,
            # else in the directory named after the file.
            for parent, name, test, attr in scan.mods:
                owner = local[parent]
                d = os.path.dirname(path)
                stem = os.path.splitext(os.path.basename(path))[0]
                if os.path.normpath(path) not in self.roots and stem != "mod":
                    d = os.path.join(d, stem)
                for inline in parent[len(base):]:
                    d = os.path.join(d, inline)
                if attr:
                    candidates = [os.path.join(os.path.dirname(path), attr)]
                else:
                    candidates = [os.path.join(d, name + ".rs"), os.path.join(d, name, "mod.rs")]
                found = next((c for c in candidates if os.path.isfile(c)), None)
                if not found:
                    tried = " or ".join(self.rel(c) for c in candidates)
                    self.warnings.append(f"{self.rel(path)}: `mod {name};` has no file ({tried})")
                    continue
                child = Module(parent + (name,), os.path.normpath(found), owner, test=test)
                owner.children[name] = child
                queue.append((child, child.file))

    # A path -> the file that defines what it names.
    @staticmethod
    def start(module: Module, head: str) -> Module | None:
        """The module a path's first segment names, if it names one of this crate."""
        if head in ("crate", "$crate"):
            while module.parent:
                module = module.parent
            return module
        if head == "super":
            return module.parent
        if head == "self":
            return module
        return module.children.get(head)

    def module_at(self, module: Module, segs: list[str]) -> Module | None:
        """The module a path of modules only names (the target of a glob `use`)."""
        m = self.start(module, segs[0]) if segs else None
        for s in segs[1:]:
            if m is None:
                return None
            m = m.parent if s == "super" else m if s == "self" else m.children.get(s)
        return m

    def resolve(
        self, module: Module, segs: list[str], item: bool = False, depth: int = 0
    ) -> str | None:
        """The file defining what `segs`, written in `module`, names; None outside the crate.
        `item`: the last segment is not a module (a path in code: `expand::expand(…)` calls
        the function `expand` even when a module of that name exists too)."""
        if depth > 16 or not segs:
            return None
        m = self.start(module, segs[0])
        if m is None:
            if depth > 0 and segs[0] in module.imports:
                # A `use` written relative to its module goes through another import.
                return self.resolve(module, module.imports[segs[0]] + segs[1:], item, depth + 1)
            return None  # another crate, a type, a variable…
        for i, s in enumerate(segs[1:], 1):
            if s == "super":
                if m.parent is None:
                    return None
                m = m.parent
            elif s == "self":
                pass
            elif s in m.children and not (item and i == len(segs) - 1):
                m = m.children[s]
            elif s in m.imports:
                # Imported or re-exported here: it is defined where the `use` points.
                target = self.resolve(m, m.imports[s] + segs[i + 1 :], item, depth + 1)
                return target or m.file
            elif s in m.items:
                return m.file
            else:
                for g in m.globs:
                    gm = self.module_at(m, g)
                    if gm and (s in gm.items or s in gm.imports or s in gm.children):
                        target = self.resolve(gm, ["self"] + segs[i:], item, depth + 1)
                        return target or gm.file
                return m.file
        return m.file

    def edges(self) -> list[Edge]:
        found: dict[tuple[str, str], Edge] = {}
        for module, ref in self.refs:
            if module.test:
                continue
            dst = self.resolve(module, ref.segments, item=ref.kind == "path")
            if dst is None or dst == module.file or dst in self.roots:
                continue
            key = (module.file, dst)
            found.setdefault(key, Edge(module.file, dst, [])).refs.append(ref)
        return sorted(found.values(), key=lambda e: (e.src, e.dst))


def strongly_connected(nodes: set[str], succ: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = 0
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(succ.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(succ.get(w, ())))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
    return out


def shortest_path(succ: dict[str, set[str]], start: str, goal: str, allowed: set[str]):
    prev = {start: None}
    queue = deque([start])
    while queue:
        v = queue.popleft()
        if v == goal:
            path = []
            while v is not None:
                path.append(v)
                v = prev[v]
            return path[::-1]
        for w in sorted(succ.get(v, ())):
            if w in allowed and w not in prev:
                prev[w] = v
                queue.append(w)
    return None


def cycles(edges: list[Edge]) -> list[list[list[str]]]:
    """Per group of mutually importing files, the shortest cycle through each of its edges."""
    succ: dict[str, set[str]] = {}
    nodes: set[str] = set()
    for e in edges:
        succ.setdefault(e.src, set()).add(e.dst)
        nodes |= {e.src, e.dst}
    groups = []
    for comp in strongly_connected(nodes, succ):
        if len(comp) < 2:
            continue
        members, seen, found = set(comp), set(), []
        for u in comp:
            for v in sorted(succ.get(u, ())):
                if v not in members:
                    continue
                back = shortest_path(succ, v, u, members)
                if not back:
                    continue
                cyc = [u] + back  # u -> v -> … -> u
                body = cyc[:-1]
                k = body.index(min(body))
                canonical = tuple(body[k:] + body[:k])
                if canonical not in seen:
                    seen.add(canonical)
                    found.append(list(canonical) + [canonical[0]])
        groups.append(sorted(found, key=lambda c: (len(c), c)))
    return groups


# --------------------------------------------------------------------------------------------
# The workspace.


def read_toml(path: str) -> dict:
    with open(path, "rb") as f:
        text = f.read().decode("utf-8")
    if tomllib is not None:
        return tomllib.loads(text)
    # Python < 3.11: a reader for what this script needs (`[workspace] members`/`exclude`,
    # `[package] name`, `[lib] path`, `[[bin]] path`), not a TOML parser.
    out: dict = {}
    table: dict = out
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if line.startswith("[["):
            table = {}
            out.setdefault(line.strip("[]").strip(), []).append(table)
        elif line.startswith("["):
            table = out.setdefault(line.strip("[]").strip(), {})
        elif "=" in line:
            key, value = (part.strip() for part in line.split("=", 1))
            table[key] = value.strip('"')
    ws = out.get("workspace", {})
    for key in ("members", "exclude"):
        m = re.search(rf"^\s*{key}\s*=\s*\[(.*?)\]", text, re.S | re.M)
        if "workspace" in out:
            ws[key] = re.findall(r'"([^"]+)"', m.group(1)) if m else []
    return out


def workspace_crates(root: str) -> list[Crate]:
    manifest = read_toml(os.path.join(root, "Cargo.toml"))
    ws = manifest.get("workspace", {})
    excluded = {os.path.normpath(os.path.join(root, e)) for e in ws.get("exclude", [])}
    dirs: list[str] = []
    for pattern in ws.get("members", []):
        for d in sorted(glob.glob(os.path.join(root, pattern))):
            d = os.path.normpath(d)
            if d in excluded or d in dirs or not os.path.isfile(os.path.join(d, "Cargo.toml")):
                continue
            dirs.append(d)
    if "package" in manifest and root not in dirs:
        dirs.insert(0, os.path.normpath(root))
    crates = []
    for d in dirs:
        pkg = read_toml(os.path.join(d, "Cargo.toml"))
        name = pkg.get("package", {}).get("name", os.path.basename(d))
        src = os.path.join(d, "src")
        roots = [os.path.join(src, "lib.rs"), os.path.join(src, "main.rs")]
        roots += sorted(glob.glob(os.path.join(src, "bin", "*.rs")))
        roots += sorted(glob.glob(os.path.join(src, "bin", "*", "main.rs")))
        lib = pkg.get("lib", {})
        if isinstance(lib, dict) and lib.get("path"):
            roots.append(os.path.join(d, lib["path"]))
        for b in pkg.get("bin", []) if isinstance(pkg.get("bin"), list) else []:
            if b.get("path"):
                roots.append(os.path.join(d, b["path"]))
        roots = list(dict.fromkeys(os.path.normpath(r) for r in roots if os.path.isfile(r)))
        crates.append(Crate(name, d, roots))
    return crates


# --------------------------------------------------------------------------------------------
# Floors: the crate root's `# Layout` table, and the edges that point up.

MODULE_NAME = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*)(/|\.rs)`")


def floors_of(root: str) -> tuple[list[list[str]], list[str]] | None:
    """The floors a crate root's `# Layout` docs declare, top floor first (each a list of
    top-level module names, without `/` or `.rs`), and the table's problems; None when the
    root declares none."""
    try:
        with open(root, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    docs = [l[3:].strip() if l.startswith("//!") else None for l in lines]
    try:
        start = next(i for i, d in enumerate(docs) if d is not None and d.lstrip("# ") == "Layout"
                     and d.startswith("#"))
    except StopIteration:
        return None
    floors: list[list[str]] = []
    problems: list[str] = []
    seen: dict[str, int] = {}
    in_table = False
    for d in docs[start + 1 :]:
        if d is None or (in_table and not d.startswith("|")):
            break
        if not d.startswith("|"):
            continue
        in_table = True
        cells = [c.strip() for c in d.strip("|").split("|")]
        if all(set(c) <= set("-: ") for c in cells):
            continue  # the header's rule
        names = next((MODULE_NAME.findall(c) for c in cells if MODULE_NAME.search(c)), [])
        if not names:
            continue  # the header row
        row = []
        for name, _kind in names:
            if name in seen:
                problems.append(f"`{name}` is named on two rows of the Layout table")
            seen[name] = len(floors)
            row.append(name)
        floors.append(row)
    return (floors, problems) if floors else None


def top_module(crate: "Crate", path: str) -> str | None:
    """The top-level module a file belongs to (`kinds` for src/kinds/mutex.rs); None for a
    crate root or a file outside src/."""
    if path in crate.roots:
        return None
    rel = crate.rel(path)
    if rel.startswith(".."):
        return None
    first = rel.split(os.sep, 1)[0]
    return first[:-3] if first.endswith(".rs") else first


def floor_problems(crate: "Crate", edges: list[Edge]) -> tuple[list[str], list[str]] | None:
    """What breaks the crate's declared floors: (problems of the table against the tree,
    upward edges); None when the crate declares no floors."""
    lib = next((r for r in crate.roots if os.path.basename(r) == "lib.rs"), None)
    declared = floors_of(lib) if lib else None
    if declared is None:
        return None
    floors, problems = declared
    level = {name: len(floors) - i for i, row in enumerate(floors) for name in row}
    present = {m for m in (top_module(crate, f) for f in crate.files) if m}
    for name in sorted(present - set(level)):
        problems.append(f"`{name}` is on no floor: add it to a row of the Layout table")
    for name in sorted(set(level) - present):
        problems.append(f"the Layout table names `{name}`, which the tree does not have")
    upward = []
    for e in edges:
        a, b = top_module(crate, e.src), top_module(crate, e.dst)
        if a is None or b is None or a not in level or b not in level:
            continue
        if level[b] > level[a]:
            first = e.refs[0]
            upward.append(
                f"UPWARD {crate.rel(e.src)} (floor of `{a}`) -> {crate.rel(e.dst)} (floor of "
                f"`{b}`, higher): {crate.rel(e.src)}:{first.line} `{first.code}`"
            )
    return problems, upward


def report(crates: list[Crate], show_edges: bool, out) -> int:
    total = 0
    total_floors = 0
    for crate in crates:
        edges = crate.edges()
        groups = cycles(edges)
        n_cycles = sum(len(g) for g in groups)
        total += n_cycles
        where = os.path.relpath(crate.dir)
        if not crate.roots:
            print(f"{crate.name} ({where}): no src/ crate root, nothing to check", file=out)
            continue
        status = "no cycle" if not groups else f"{n_cycles} cycle(s) in {len(groups)} group(s)"
        floored = floor_problems(crate, edges)
        if floored is not None:
            problems, upward = floored
            n = len(problems) + len(upward)
            status += ", floors kept" if not n else f", {n} floor problem(s)"
            total_floors += n
        print(
            f"{crate.name} ({where}): {len(crate.files)} files, {len(edges)} edges, {status}",
            file=out,
        )
        if floored is not None:
            for line in floored[0] + floored[1]:
                print(f"  {line}", file=out)
        for w in crate.warnings:
            print(f"  warning: {w}", file=out)
        by_pair = {(e.src, e.dst): e for e in edges}
        if show_edges:
            for e in edges:
                first = e.refs[0]
                more = f" (+{len(e.refs) - 1} more)" if len(e.refs) > 1 else ""
                print(
                    f"  edge {crate.rel(e.src)} -> {crate.rel(e.dst)}    "
                    f"{crate.rel(e.src)}:{first.line} `{first.code}`{more}",
                    file=out,
                )
        for group in groups:
            files = sorted({f for c in group for f in c})
            print(f"  CYCLE among {', '.join(crate.rel(f) for f in files)}:", file=out)
            for c in group:
                print("    " + " -> ".join(crate.rel(f) for f in c), file=out)
                for a, b in zip(c, c[1:]):
                    first = by_pair[(a, b)].refs[0]
                    print(
                        f"      {crate.rel(a)} -> {crate.rel(b)}: "
                        f"{crate.rel(a)}:{first.line} `{first.code}`",
                        file=out,
                    )
    if total or total_floors:
        if total:
            print(f"FAIL: {total} module cycle(s); every import should point down", file=out)
        if total_floors:
            print(
                f"FAIL: {total_floors} floor problem(s); an import may point into its own floor "
                "or a lower one, never up, and every module stands on one floor",
                file=out,
            )
        return 1
    print("ok: no module cycle" + (", every floor kept" if any_floors(crates) else ""), file=out)
    return 0


def any_floors(crates: list[Crate]) -> bool:
    return any(floor_problems(c, c.edges()) is not None for c in crates)


# --------------------------------------------------------------------------------------------
# Self-test: a fake crate in a temp dir, clean, then with cycles injected in each way.

FAKE = {
    "Cargo.toml": '[workspace]\nmembers = ["crates/*"]\nexclude = ["crates/skipped"]\n',
    "crates/skipped/Cargo.toml": '[package]\nname = "skipped"\n',
    "crates/skipped/src/lib.rs": "mod a;\n",  # no a.rs: would warn if it were read
    "crates/fake/Cargo.toml": '[package]\nname = "fake"\nversion = "0.1.0"\n',
    "crates/fake/src/lib.rs": """
//! Root: edges *to* it are not counted; `pub use` re-exports resolve to their module.
mod floor;
mod middle;
mod top;
pub mod nested;
pub use floor::{Floor, FLOOR as BASE};
pub use top::*;
pub fn entry() -> u32 { top::run() }
""",
    "crates/fake/src/floor.rs": """
//! The floor: imports nothing of this crate.
//! Doc comments mention crate::top::run() and `use crate::middle;` but are not code.
/* block comment: crate::top::run() /* nested: use super::middle; */ still a comment */
pub struct Floor;
pub const FLOOR: u32 = 1;
#[cfg(test)]
mod file_tests;
pub fn text() -> &'static str {
    let _c = '"'; let _d = b'x'; let _life: &'static str = "crate::top::run()";
    r#"use crate::middle::Middle; "quoted" crate::top::x"#
}
#[cfg(test)]
mod tests {
    use crate::top::run; // tests may reach up: not counted
    #[test] fn t() { let _ = run(); let _ = super::super::middle::Middle; }
}
""",
    "crates/fake/src/floor/file_tests.rs": "use crate::top::run;\n",
    "crates/fake/src/middle.rs": """
use crate::floor::Floor;
use self::{nested::leaf::Leaf as L};
pub struct Middle(pub Floor, pub L);
pub fn make() -> Middle { Middle(crate::Floor, nested::leaf::Leaf) }
mod nested { pub mod leaf { pub struct Leaf; } }
pub(crate) fn base() -> u32 { crate::BASE }
pub(in crate::middle) fn hidden() {}
fn generated() { let _ = quote!(crate::top::run()); }
""",
    "crates/fake/src/top.rs": """
use crate::middle::{self, make};
pub fn run() -> u32 { let _ = make(); middle::base() + crate::nested::inner::value() }
pub fn also() -> impl Fn() + use<> { || {} }
""",
    "crates/fake/src/nested/mod.rs": """
pub mod inner;
mod helper;
pub fn helper() {}
""",
    "crates/fake/src/nested/helper.rs": "pub fn x() { super::super::top::run(); }\n",
    "crates/fake/src/nested/inner.rs": """
pub fn value() -> u32 { super::super::floor::FLOOR }
""",
}

# Each injection makes a cycle in a different way: (what, [(file, text appended)], the files
# of the cycle's group, or None when it must stay clean).
DOWN_TO_FLOOR = {"floor.rs", "middle.rs", "top.rs", "nested/inner.rs"}
INJECTIONS = [
    ("use", [("floor.rs", "use crate::top::run;\n")], DOWN_TO_FLOOR),
    (
        "inline crate:: path",
        [("floor.rs", "fn f() -> u32 { crate::top::run() }\n")],
        DOWN_TO_FLOOR,
    ),
    (
        "inline super:: path",
        [("nested/inner.rs", "fn f() { let _ = super::super::top::run(); }\n")],
        {"nested/inner.rs", "top.rs"},
    ),
    (
        "item re-exported at the root by a glob",
        [("middle.rs", "fn g() -> u32 { crate::run() }\n")],
        {"middle.rs", "top.rs"},
    ),
    (
        "use inside an inline module",
        [("floor.rs", "mod sub { pub(crate) use crate::middle::Middle; }\n")],
        {"floor.rs", "middle.rs"},
    ),
    ("pub use of a module", [("floor.rs", "pub use crate::middle;\n")], {"floor.rs", "middle.rs"}),
    (
        "glob of the parent and the parent's child path",
        [
            ("nested/inner.rs", "use super::*;\n"),
            ("nested/mod.rs", "pub fn v() -> u32 { inner::value() }\n"),
        ],
        {"nested/mod.rs", "nested/inner.rs"},
    ),
    (
        "a parent using its child",
        [("nested/mod.rs", "pub fn v() -> u32 { self::inner::value() }\n")],
        None,
    ),
    # `crate::nested::helper()` calls the function in nested/mod.rs, not the module
    # nested/helper.rs (which uses top.rs): no cycle. `use crate::nested::helper` is both.
    (
        "a function named like a module",
        [("top.rs", "fn w() { crate::nested::helper(); }\n")],
        None,
    ),
    (
        "use of a module named like a function",
        [("top.rs", "use crate::nested::helper;\n")],
        {"nested/helper.rs", "top.rs"},
    ),
]


# A crate with declared floors: folders `top/` over `mid/` over the ground file `base.rs`.
FLOORED = {
    "Cargo.toml": '[workspace]\nmembers = ["floored"]\n',
    "floored/Cargo.toml": '[package]\nname = "floored"\n',
    "floored/src/lib.rs": """
//! A crate with floors.
//!
//! # Layout
//! | floor | modules | what |
//! |---|---|---|
//! | top | `top/` | the face |
//! | middle | `mid/` | the middle |
//! | ground | `base.rs` | the ground |
//!
//! # Next section
//! | not | `a/` | table |
mod base;
mod mid;
mod top;
pub use top::face::Face;
""",
    "floored/src/base.rs": "pub struct Base;\n",
    "floored/src/mid/mod.rs": "pub(crate) mod inner;\npub(crate) mod side;\n",
    "floored/src/mid/inner.rs": "use crate::base::Base;\npub struct Inner(pub Base);\n",
    "floored/src/mid/side.rs": "use super::inner::Inner;\npub struct Side(pub Inner);\n",
    "floored/src/top/mod.rs": "pub(crate) mod face;\npub(crate) mod lone;\n",
    "floored/src/top/lone.rs": "pub struct Lone;\n",
    "floored/src/top/face.rs": "use crate::mid::side::Side;\npub struct Face(pub Side);\n",
}


def self_test() -> int:
    me = os.path.abspath(__file__)
    failures = []

    def run(root: str, *args: str) -> tuple[int, str]:
        p = subprocess.run(
            [sys.executable, me, "--root", root, *args], capture_output=True, text=True
        )
        return p.returncode, p.stdout + p.stderr

    def check(ok: bool, what: str, output: str = "") -> None:
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            failures.append(what)
            if output:
                print("     | " + output.replace("\n", "\n     | "))

    # The lexer on its own.
    sample = r"""a /* x /* y */ z */ 'a' 'b '\'' r#""# br##"x"## r#type b'"' c"s" $crate::x 1.5e3"""
    texts = [t.text for t in lex(sample)]
    expected = ["a", "''", "'b", "''", '""', '""', "type", "''", '""', "$crate", "::", "x"]
    check(
        texts == expected + ["1", ".", "5e3"],
        f"lexer: comments, chars, lifetimes, raw strings and idents ({texts})",
    )

    with tempfile.TemporaryDirectory() as tmp:
        for path, text in FAKE.items():
            full = os.path.join(tmp, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w", encoding="utf-8") as f:
                f.write(text)
        code, out = run(tmp, "--edges")
        check(code == 0, "the clean crate passes (exit 0)", out)
        edges = set(re.findall(r"edge (\S+) -> (\S+)", out))
        expected = {
            ("lib.rs", "floor.rs"),  # pub use floor::{…}: edges *from* the root count
            ("lib.rs", "top.rs"),  # pub use top::*; top::run()
            ("middle.rs", "floor.rs"),  # use crate::floor::Floor; crate::Floor; crate::BASE
            ("top.rs", "middle.rs"),  # use crate::middle::{self, make}
            ("top.rs", "nested/inner.rs"),  # crate::nested::inner::value()
            ("nested/inner.rs", "floor.rs"),  # super::super::floor::FLOOR
            ("nested/helper.rs", "top.rs"),  # super::super::top::run()
        }
        check(edges == expected, f"the clean crate's edges are exactly {sorted(expected)}", out)
        check("skipped" not in out, "`exclude` is honoured", out)
        check("fake (" in out and "8 files" in out, "globbed members and every file are found", out)

        src = os.path.join(tmp, "crates/fake/src")
        for what, changes, members in INJECTIONS:
            saved = {}
            for path, text in changes:
                full = os.path.join(src, path)
                with open(full, encoding="utf-8") as f:
                    saved[full] = f.read()
                with open(full, "a", encoding="utf-8") as f:
                    f.write(text)
            code, out = run(tmp)
            shown = "; ".join(f"`{t.strip()}` in {p}" for p, t in changes)
            if members is None:
                check(code == 0, f"{what}: {shown} points down, no cycle", out)
            else:
                named = re.search(r"CYCLE among (.*):", out)
                got = set(named.group(1).split(", ")) if named else set()
                check(
                    code == 1 and got == members,
                    f"{what}: {shown} is a cycle among {sorted(members)}",
                    out,
                )
            for full, text in saved.items():
                with open(full, "w", encoding="utf-8") as f:
                    f.write(text)
        code, out = run(tmp)
        check(code == 0, "clean again after the injections are removed", out)

        # A cycle in one crate fails the run even when the other crates are clean.
        two = os.path.join(tmp, "crates/other")
        os.makedirs(os.path.join(two, "src"))
        with open(os.path.join(two, "Cargo.toml"), "w") as f:
            f.write('[package]\nname = "other"\n')
        with open(os.path.join(two, "src/main.rs"), "w") as f:
            f.write("mod x;\nmod y;\nfn main() { x::f() }\n")
        with open(os.path.join(two, "src/x.rs"), "w") as f:
            f.write("pub fn f() { crate::y::g() }\n")
        with open(os.path.join(two, "src/y.rs"), "w") as f:
            f.write("pub fn g() {}\npub fn h() { super::x::f() }\n")
        code, out = run(tmp)
        check(
            code == 1 and "other (" in out and "x.rs -> y.rs -> x.rs" in out,
            "a binary crate's cycle is found and fails the run",
            out,
        )
        code, out = run(tmp, "--crate", "fake")
        check(code == 0 and "other" not in out, "--crate restricts the check", out)

    # Floors: the clean floored crate keeps them; an upward folder import, a module on no
    # floor and a floor naming a module the tree lacks each fail, named.
    with tempfile.TemporaryDirectory() as tmp:
        for path, text in FLOORED.items():
            full = os.path.join(tmp, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w", encoding="utf-8") as f:
                f.write(text)
        code, out = run(tmp)
        check(code == 0 and "floors kept" in out, "the floored crate keeps its floors", out)
        src = os.path.join(tmp, "floored/src")

        def with_change(path: str, text: str, mode: str = "a") -> tuple[int, str]:
            full = os.path.join(src, path)
            saved = open(full, encoding="utf-8").read() if os.path.exists(full) else None
            with open(full, mode, encoding="utf-8") as f:
                f.write(text)
            try:
                return run(tmp)
            finally:
                if saved is None:
                    os.remove(full)
                else:
                    with open(full, "w", encoding="utf-8") as f:
                        f.write(saved)

        code, out = with_change("mid/inner.rs", "fn up() { let _ = crate::top::lone::Lone; }\n")
        check(
            code == 1 and "UPWARD mid/inner.rs (floor of `mid`) -> top/lone.rs" in out
            and "no cycle" in out,
            "an upward folder import with no cycle fails, named with its line",
            out,
        )
        code, out = with_change("base.rs", "use crate::mid::side::Side;\n")
        check(code == 1 and "UPWARD base.rs" in out, "a ground file importing a folder fails", out)
        with open(os.path.join(src, "stray.rs"), "w", encoding="utf-8") as f:
            f.write("pub struct Stray;\n")
        code, out = with_change("lib.rs", "mod stray;\n")
        check(code == 1 and "`stray` is on no floor" in out, "a module on no floor fails", out)
        os.remove(os.path.join(src, "stray.rs"))
        code, out = with_change(
            "lib.rs",
            open(os.path.join(src, "lib.rs")).read().replace("`base.rs`", "`base.rs`, `gone.rs`"),
            "w",
        )
        check(
            code == 1 and "names `gone`, which the tree does not have" in out,
            "a floor naming a module the tree lacks fails",
            out,
        )

    if failures:
        print(f"self-test FAILED: {len(failures)} check(s)")
        return 1
    print("self-test ok")
    return 0


def main() -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(
        description="List module edges in each workspace crate and fail on an import cycle."
    )
    parser.add_argument("--root", default=os.path.dirname(here), help="workspace root")
    parser.add_argument("--edges", action="store_true", help="print every edge too")
    parser.add_argument(
        "--crate", action="append", default=[], metavar="NAME", help="check only this crate"
    )
    parser.add_argument("--self-test", action="store_true", help="test this script and exit")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    try:
        crates = workspace_crates(os.path.abspath(args.root))
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.crate:
        unknown = set(args.crate) - {c.name for c in crates}
        if unknown:
            print(f"error: no such crate: {', '.join(sorted(unknown))}", file=sys.stderr)
            return 2
        crates = [c for c in crates if c.name in args.crate]
    cwd = os.getcwd()
    os.chdir(os.path.abspath(args.root))
    try:
        return report(crates, args.edges, sys.stdout)
    finally:
        os.chdir(cwd)


if __name__ == "__main__":
    sys.exit(main())
