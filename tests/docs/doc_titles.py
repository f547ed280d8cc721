#!/usr/bin/env python3
"""No section title of README.md or docs/*.md names an issue or a work pass: the docs are references (the latest
measurement replaces the older one; history stays in git), not a log of the work.

A title is a Markdown heading (a line starting with #, outside code blocks). It fails when it holds "issue" followed
by a number, or a pass ("second pass", "5th pass", "pass 3").

Usage: doc_titles.py SOURCE_DIR [FILE.md ...]      Exit status: 0 when no title does, 1 otherwise (each printed).
"""
import glob
import os
import re
import sys

LOG_WORDS = re.compile(
    r"\bissue\s*#?\d+|\b(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|\d+(st|nd|rd|th))\s+pass\b|"
    r"\bpass\s+\d+\b", re.I)


def main():
    source = os.path.abspath(sys.argv[1])
    pages = sys.argv[2:] or [os.path.join(source, "README.md")] + sorted(glob.glob(os.path.join(source, "docs", "*.md")))
    failed = 0
    titles = 0
    for page in pages:
        in_block = False
        for number, line in enumerate(open(page, encoding="utf-8"), 1):
            if line.lstrip().startswith("```"):
                in_block = not in_block
                continue
            if in_block or not line.startswith("#"):
                continue
            titles += 1
            if LOG_WORDS.search(line):
                failed += 1
                print(f"FAIL {os.path.relpath(page, source)}:{number}: a title names an issue or a pass: {line.strip()}")
    print(f"doc titles: {titles} checked, {failed} naming an issue or a pass")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
