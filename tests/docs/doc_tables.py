#!/usr/bin/env python3
"""Every table of measured numbers in README.md and docs/*.md says when and how it was measured.

A table (Markdown pipe table) counts as measured when one of its body cells holds a number with a unit of time, rate
or ratio (µs, ms, s, ns, %, ×, x, GB/s, TB/s, GiB/s, MLUPS, TFLOP/s, steps/s, MiB, GiB), when four or more body
cells start with a decimal number, or with a decimal ratio column ("ratio", "÷", "speedup" in the header). Such a table needs a date (YYYY-MM-DD) and a command (a code span starting
with `conveyor`, `build/bin/conveyor`, `scripts/` or `mpirun`, or a shell block) in the text since the heading above
it, in the caption right below it (up to 6 lines), or in the page's opening lines (a generated report's header). A table marked `<!-- doc-test: not measured -->` on the line above it is left out
(numbers that are limits, options or plans, not measurements); one marked `<!-- doc-test: one-off -->` (measured by a
program that is not kept) needs the date only.

Usage: doc_tables.py SOURCE_DIR [FILE.md ...]    Exit status: 0 when every measured table is dated, 1 otherwise.
"""
import glob
import os
import re
import sys

UNIT = re.compile(r"\d(\.\d+)?\s*(µs|us|ms|ns|s\b|%|×|x\b|GB/s|TB/s|GiB/s|MB/s|MLUPS|TFLOP/s|steps/s|MiB|GiB|KiB)")
DECIMAL = re.compile(r"^\s*[−-]?\d+\.\d+")
DATE = re.compile(r"\b20\d\d-\d\d-\d\d(?!\d)")
COMMAND = re.compile(r"`(build/bin/)?(conveyor|scripts/|mpirun|compute-sanitizer)[^`]*`|^```(sh|bash)?\s*$", re.M)
MEASURED_HEADER = re.compile(r"ratio|÷|speedup|µs|ms/|GB/s|MLUPS", re.I)


def tables_of(lines):
    """(first line index, header line, body lines) of every pipe table outside code blocks."""
    out = []
    in_block = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith("```"):
            in_block = not in_block
            i += 1
            continue
        if (not in_block and line.lstrip().startswith("|") and i + 1 < len(lines)
                and re.match(r"^\s*\|?\s*:?-+:?\s*\|", lines[i + 1])):
            start = i
            i += 2
            body = []
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                body.append(lines[i])
                i += 1
            out.append((start, lines[start], body, i))
            continue
        i += 1
    return out


def measured(header, body):
    cells = [cell for row in body for cell in row.split("|")]
    if any(UNIT.search(cell) for cell in cells):
        return True
    if sum(1 for cell in cells if DECIMAL.match(cell)) >= 4:  # a table of decimal results
        return True
    return bool(MEASURED_HEADER.search(header)) and any(re.search(r"\d\.\d", row) for row in body)


def context(lines, start, end):
    """The text from the heading above the table (lines start..end) to it, the caption below it, and the page's
    opening lines."""
    first = 0
    for k in range(start - 1, -1, -1):
        if lines[k].startswith("#"):
            first = k
            break
    return "\n".join(lines[first:start] + lines[end:end + 6] + lines[:12])


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    source = os.path.abspath(sys.argv[1])
    pages = sys.argv[2:] or [os.path.join(source, "README.md")] + sorted(glob.glob(os.path.join(source, "docs", "*.md")))
    checked = exempt = 0
    failures = []
    for page in pages:
        lines = open(page, encoding="utf-8").read().split("\n")
        for start, header, body, end in tables_of(lines):
            if start > 0 and "doc-test: not measured" in lines[start - 1]:
                exempt += 1
                continue
            if not measured(header, body):
                continue
            checked += 1
            text = context(lines, start, end)
            one_off = start > 0 and "doc-test: one-off" in lines[start - 1]
            needs = (("a date", DATE),) if one_off else (("a date", DATE), ("a command", COMMAND))
            missing = [w for w, pattern in needs if not pattern.search(text)]
            if missing:
                failures.append(f"{os.path.relpath(page, source)}:{start + 1}: a table of measured numbers without "
                                f"{' and '.join(missing)} above it: {header.strip()[:80]}")
    print(f"doc tables: {checked} measured tables checked, {exempt} marked not measured, {len(failures)} undated")
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
