#!/usr/bin/env python3
"""What each published crate's package holds (`cargo package --list`), checked against what the
crate needs once it is unpacked away from this repository (issue 47):

* every Lua file it loads: each `include_str!("….lua")` of its sources, resolved from the file
  that includes it, and every `.lua` file tracked under its folder (an include that reaches
  outside the crate's folder is an error: it breaks the package);
* its README: the file its `readme = "…"` names, or a README.md in its folder (cargo takes it
  by default); a crate with neither fails (its registry page would be empty);
* both licenses the crates declare, LICENSE-MIT and LICENSE-APACHE;
* a manifest without placeholder addresses (`repository`, `homepage` or `documentation` on a
  reserved domain such as `example.invalid`): a registry page must not link nowhere.

Usage: scripts/check-packages.py PACKAGE...   (the Makefile's `package` step)
       scripts/check-packages.py --self-test   (the check on made-up lists: it must catch each gap)
"""

import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LICENSES = ("LICENSE-MIT", "LICENSE-APACHE")
INCLUDE = re.compile(r'include_str!\(\s*"([^"]+\.lua)"\s*\)')
README_FIELD = re.compile(r'^\s*readme\s*=\s*"([^"]+)"', re.MULTILINE)
LINK_FIELD = re.compile(r'^\s*(repository|homepage|documentation)\s*=\s*"([^"]+)"', re.MULTILINE)
PLACEHOLDER = re.compile(r'//([^/]*\.)?(invalid|example|test|localhost)(/|$)|//example\.(com|org|net)')


def lua_includes(crate_dir):
    """The Lua files the crate's sources include, relative to its folder, and the includes that
    reach outside it."""
    inside, outside = set(), []
    for folder, _, files in os.walk(os.path.join(crate_dir, "src")):
        for name in files:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(folder, name)
            with open(path, encoding="utf-8") as source:
                text = source.read()
            for included in INCLUDE.findall(text):
                target = os.path.normpath(os.path.join(folder, included))
                rel = os.path.relpath(target, crate_dir)
                if rel.startswith(".."):
                    outside.append(f"{os.path.relpath(path, ROOT)} includes {included}")
                else:
                    inside.add(rel)
    return inside, outside


def tracked_lua(crate_dir):
    """The `.lua` files git tracks under the crate's folder, relative to it."""
    out = subprocess.run(
        ["git", "ls-files", "--", "*.lua"],
        cwd=crate_dir, check=True, capture_output=True, text=True,
    ).stdout
    return {line for line in out.splitlines() if line}


def readme_of(crate_dir):
    """The README the package must hold, or None."""
    with open(os.path.join(crate_dir, "Cargo.toml"), encoding="utf-8") as manifest:
        field = README_FIELD.search(manifest.read())
    if field:
        return field.group(1)
    if os.path.exists(os.path.join(crate_dir, "README.md")):
        return "README.md"
    return None


def placeholders(manifest):
    """The manifest's links that point at a reserved or made-up domain."""
    return [f"{field} = {url}" for field, url in LINK_FIELD.findall(manifest)
            if PLACEHOLDER.search(url)]


def gaps(listed, lua, outside, readme, manifest=""):
    """What the package lacks: one message per missing file, outside include or placeholder
    link."""
    problems = [f"includes a file outside its folder: {o}" for o in outside]
    problems += [f"links a placeholder: {p}" for p in placeholders(manifest)]
    if readme is None:
        problems.append("has no README (no `readme =`, no README.md)")
    problems += [f"lacks {path} (a Lua script it loads)" for path in sorted(lua - listed)]
    problems += [f"lacks {lic}" for lic in LICENSES if lic not in listed]
    if readme is not None and readme not in listed:
        problems.append(f"lacks its README {readme}")
    return problems


def package_meta(package):
    """The package as cargo resolves it (workspace-inherited fields filled in)."""
    out = subprocess.run(
        ["cargo", "metadata", "--no-deps", "--format-version", "1", "--offline"],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout
    for pkg in json.loads(out)["packages"]:
        if pkg["name"] == package:
            return pkg
    sys.exit(f"check-packages: no package {package} in the workspace")


def check(package):
    meta = package_meta(package)
    crate_dir = os.path.dirname(meta["manifest_path"])
    listed = subprocess.run(
        ["cargo", "package", "--list", "--allow-dirty", "-p", package],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout.split()
    included, outside = lua_includes(crate_dir)
    lua = included | tracked_lua(crate_dir)
    readme = readme_of(crate_dir)
    # The resolved fields, so a placeholder inherited from the workspace is caught too.
    links = "".join(f'{field} = "{meta[field]}"\n'
                    for field in ("repository", "homepage", "documentation") if meta.get(field))
    problems = gaps(set(listed), lua, outside, readme, links)
    for problem in problems:
        print(f"check-packages: {package} {problem}", file=sys.stderr)
    verdict = "FAILED (above)" if problems else "Lua scripts, README and licenses all in"
    print(f"check-packages: {package}: {len(listed)} files, {len(lua)} Lua scripts: {verdict}")
    return not problems


def self_test():
    full = {"src/lib.rs", "src/scripts/a.lua", "LICENSE-MIT", "LICENSE-APACHE", "README.md"}
    lua = {"src/scripts/a.lua"}
    assert gaps(full, lua, [], "README.md") == [], "a complete package passes"
    for missing in ("src/scripts/a.lua", "LICENSE-MIT", "LICENSE-APACHE", "README.md"):
        found = gaps(full - {missing}, lua, [], "README.md")
        assert len(found) == 1 and missing in found[0], (missing, found)
    assert gaps(full, lua, ["src/x.rs includes ../../y.lua"], "README.md"), "an outside include fails"
    assert gaps(full, lua, [], None), "a crate without a README fails"
    for url in ("https://example.invalid/dlock", "https://example.com/x", "http://localhost/d"):
        found = gaps(full, lua, [], "README.md", f'repository = "{url}"\n')
        assert len(found) == 1 and url in found[0], (url, found)
    assert not gaps(full, lua, [], "README.md", 'documentation = "https://docs.rs/dlock-core"\n')
    here = os.path.join(ROOT, "dlock-core")
    included, _ = lua_includes(here)
    assert "src/scripts/acquire.lua" in included, "the include pattern reads dlock-core's scripts"
    print("check-packages: self-test passed")


def main(args):
    if args == ["--self-test"]:
        self_test()
        return 0
    if not args:
        sys.exit(__doc__)
    results = [check(package) for package in args]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
