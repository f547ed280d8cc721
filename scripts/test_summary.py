#!/usr/bin/env python3
"""One line that says what a CTest run did: "497 passed, 356 skipped: 351 no CUDA device, 4 need 2 GPUs, 1 running
as root" (and the failures' names, if any). Reads the JUnit file `ctest --output-junit` wrote; a skipped test's
reason is the message GoogleTest printed after "Skipped" (GTEST_SKIP() << reason), or "skipped" when none is found.

Usage: test_summary.py JUNIT.xml        Exit status: 0 when no test failed, 1 otherwise.
"""
import collections
import re
import sys
import xml.etree.ElementTree as ET

REASON = re.compile(r"Skipped\n(.+)")
# Messages CTest writes itself for a skip, which say how it saw the skip, not why.
CTEST_MARKERS = ("SKIP_REGULAR_EXPRESSION_MATCHED", "SKIP_RETURN_CODE")
SKIP_LINE = re.compile(r"\bskip", re.IGNORECASE)


def reason_of(case):
    text = "".join(e.text or "" for e in case.iter("system-out"))
    for m in REASON.finditer(text):
        line = m.group(1).strip()
        if line and not line.startswith("["):
            # "needs 2 CUDA devices, 1 visible" and the like: the counts of this machine are dropped from the key.
            return re.sub(r", \d+ visible$", "", line)
    skipped = case.find("skipped")
    message = (skipped.get("message") or "").strip() if skipped is not None else ""
    if message and not message.startswith(CTEST_MARKERS):
        return message
    # CTest's own marker (a script's exit status 77, a SKIP_REGULAR_EXPRESSION): the reason is what the test printed,
    # its last line that says it skips, or what the regular expression names.
    for line in reversed(text.splitlines()):
        line = line.strip()
        if SKIP_LINE.search(line) and not line.startswith("["):
            return line[:120]
    for known in ("no CUDA device", "shared data missing", "needs 2", "running as root"):
        if known in text:
            return known
    return "skipped"


def main():
    root = ET.parse(sys.argv[1]).getroot()
    passed, failed, skipped = 0, [], collections.Counter()
    for case in root.iter("testcase"):
        status = case.get("status", "")
        if case.find("skipped") is not None or status in ("notrun", "disabled"):
            skipped[reason_of(case)] += 1
        elif case.find("failure") is not None or case.find("error") is not None or status == "fail":
            failed.append(case.get("name"))
        else:
            passed += 1
    parts = [f"{passed} passed"]
    if skipped:
        reasons = ", ".join(f"{n} {r}" for r, n in skipped.most_common())
        parts.append(f"{sum(skipped.values())} skipped: {reasons}")
    if failed:
        parts.append(f"{len(failed)} failed: {', '.join(failed)}")
    print("tests: " + ", ".join(parts))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
