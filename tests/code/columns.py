#!/usr/bin/env python3
"""The public headers (include/) keep to 100 columns, counted in characters (issue 41): they are read in editors
and side by side in reviews. The one exception is the string of an `#error` directive, which the compiler prints as
it is. Usage: columns.py ROOT [LIMIT]. Exit 1 naming each line that is wider."""
import pathlib
import sys

root = pathlib.Path(sys.argv[1])
limit = int(sys.argv[2]) if len(sys.argv) > 2 else 100
wide = []
count = 0
for path in sorted(root.glob("include/**/*")):
    if path.suffix not in (".hpp", ".cuh", ".h"):
        continue
    lines = path.read_text(encoding="utf-8").split("\n")
    for n, line in enumerate(lines, 1):
        count += 1
        after_error = n > 1 and lines[n - 2].startswith("#error")
        if len(line) > limit and not (after_error and line.strip().startswith('"')):
            wide.append(f"{path.relative_to(root)}:{n}: {len(line)} columns")
for w in wide:
    print(w)
print(f"columns: {count} lines of include/, {len(wide)} over {limit} columns")
sys.exit(1 if wide else 0)
