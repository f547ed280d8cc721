#!/usr/bin/env python3
"""Every C++ block of README.md and docs/*.md marked as a complete example compiles as written.

A block is a complete example when the line above its opening ``` holds `<!-- doc-test: compile -->`: it is then a
whole translation unit (its own includes, no undeclared names), compiled as CUDA C++ (kernels allowed) against the
project's public headers alone: `NVCC -std=c++20 -x cu -c -I INCLUDE_DIR`. Other blocks are fragments and are not
compiled. Each page must mark at least the blocks it calls examples; the test counts them.

Usage: doc_snippets.py NVCC INCLUDE_DIR SOURCE_DIR [FILE.md ...]
Exit status: 0 when every marked block compiles, 1 otherwise (each failure with its page, line and the compiler's
first error lines).
"""
import glob
import os
import subprocess
import sys
import tempfile

MARK = "doc-test: compile"


def blocks_of(path):
    """(line of the opening fence, code) of every marked block."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out = []
    i = 0
    while i < len(lines):
        if lines[i].lstrip().startswith("```") and i > 0 and MARK in lines[i - 1]:
            start = i
            i += 1
            code = []
            while i < len(lines) and not lines[i].lstrip().startswith("```"):
                code.append(lines[i])
                i += 1
            out.append((start + 1, "\n".join(code) + "\n"))
        i += 1
    return out


def main():
    if len(sys.argv) < 4:
        print(__doc__)
        return 2
    nvcc, include, source = sys.argv[1], os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3])
    pages = sys.argv[4:] or [os.path.join(source, "README.md")] + sorted(glob.glob(os.path.join(source, "docs", "*.md")))
    failures = []
    compiled = 0
    with tempfile.TemporaryDirectory() as scratch:
        for page in pages:
            for number, code in blocks_of(page):
                name = os.path.join(scratch, f"snippet_{compiled}.cu")
                with open(name, "w", encoding="utf-8") as f:
                    f.write(code)
                compiled += 1
                p = subprocess.run([nvcc, "-std=c++20", "-x", "cu", "-c", "-I", include, name, "-o",
                                    os.path.join(scratch, "snippet.o")], capture_output=True, text=True)
                if p.returncode != 0:
                    errors = [l for l in (p.stdout + p.stderr).split("\n") if "error" in l][:3]
                    failures.append(f"{os.path.relpath(page, source)}:{number}: does not compile: "
                                    + " | ".join(e.replace(name, "snippet") for e in errors))
    print(f"doc snippets: {compiled} complete examples compiled, {len(failures)} failed")
    for f in failures:
        print("FAIL " + f)
    return 1 if failures or compiled == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
