#!/usr/bin/env python3
"""CHANGELOG.md has a dated section for the version in include/conveyor/version.hpp, and its sections run newest
first (docs/stability.md); an '## [Unreleased]' section may come first (Keep a Changelog: changes not yet released). Usage: changelog.py ROOT [CHANGELOG] (default ROOT/CHANGELOG.md). Exit 1 naming what
is wrong."""
import re
import sys
from datetime import date


def version_of(root):
    text = open(f"{root}/include/conveyor/version.hpp", encoding="utf-8").read()
    parts = [re.search(rf"#define CONVEYOR_VERSION_{p} (\d+)", text).group(1) for p in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(parts)


def sections(path):
    out = []
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        if line.startswith("## "):
            if line.strip() == "## [Unreleased]":
                if out:
                    sys.exit(f"{path}:{n}: '## [Unreleased]' must be the first section")
                continue
            m = re.fullmatch(r"## \[(\d+)\.(\d+)\.(\d+)\] - (\d{4}-\d{2}-\d{2})\s*", line)
            if not m:
                sys.exit(f"{path}:{n}: a section title must read '## [X.Y.Z] - YYYY-MM-DD', not {line.strip()!r}")
            out.append((n, tuple(int(g) for g in m.groups()[:3]), date.fromisoformat(m.group(4))))
    return out


def main():
    root = sys.argv[1]
    path = sys.argv[2] if len(sys.argv) > 2 else f"{root}/CHANGELOG.md"
    version = version_of(root)
    found = sections(path)
    if not any(".".join(map(str, v)) == version for _, v, _ in found):
        sys.exit(f"{path}: no section '## [{version}] - YYYY-MM-DD' for the version in include/conveyor/version.hpp")
    for (n0, v0, d0), (n1, v1, d1) in zip(found, found[1:]):
        if not (v0 > v1 and d0 >= d1):
            sys.exit(f"{path}:{n1}: sections must run newest first: {v1} ({d1}) after {v0} ({d0}) at line {n0}")
    print(f"{path}: {len(found)} sections, {version} present, newest first")


main()
