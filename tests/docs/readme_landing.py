#!/usr/bin/env python3
"""README.md is a landing page: at most 150 lines; the two set-up commands (scripts/demo.sh, scripts/test.sh) come
before the first example, and the first example before line 60. Usage: readme_landing.py README. Exit 1 naming
the rule broken."""
import sys

path = sys.argv[1]
lines = open(path, encoding="utf-8").read().splitlines()


def first(needle):
    return next((n for n, line in enumerate(lines, 1) if needle in line), None)


if len(lines) > 150:
    sys.exit(f"{path}: {len(lines)} lines; a landing page has at most 150 (move detail into docs/)")
demo, test, example = first("scripts/demo.sh"), first("scripts/test.sh"), first("```cpp")
if demo is None or test is None:
    sys.exit(f"{path}: the two set-up commands (scripts/demo.sh, scripts/test.sh) are missing")
if example is None or example > 60 or example < max(demo, test):
    sys.exit(f"{path}: the first example (```cpp) must follow the set-up commands and start before line 60; "
             f"it starts at line {example}")
print(f"{path}: {len(lines)} lines; set-up commands at lines {demo} and {test}, the first example at line {example}")
