#!/usr/bin/env python3
"""Feeds mutated graph files to `conveyor graph show` and `conveyor graph diff`: every run must end with exit status
0 or 1 (a clean refusal), within a time limit, never by a signal. Usage: fuzz_graph_cli.py CONVEYOR SEED_FILE COUNT"""
import os
import random
import subprocess
import sys
import tempfile

conveyor, seed_file, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
seed = open(seed_file, "rb").read()
rng = random.Random(20261205)
bad = 0
refused = 0
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "m.cgf")
    for i in range(count):
        data = bytearray(seed)
        for _ in range(rng.randint(1, 8)):
            if not data:
                break
            at = rng.randrange(len(data))
            op = rng.randrange(4)
            if op == 0:
                data[at] ^= 1 << rng.randrange(8)
            elif op == 1:
                data[at] = rng.randrange(256)
            elif op == 2:
                del data[at]
            else:
                del data[at:]
        with open(path, "wb") as f:
            f.write(data)
        for args in (["graph", "show", path], ["graph", "diff", seed_file, path]):
            try:
                r = subprocess.run([conveyor] + args, capture_output=True, timeout=20)
            except subprocess.TimeoutExpired:
                print(f"mutant {i}: {' '.join(args[:2])} did not finish in 20 s")
                bad += 1
                continue
            if r.returncode not in (0, 1):
                print(f"mutant {i}: {' '.join(args[:2])} ended with status {r.returncode}: {r.stderr[-300:]!r}")
                bad += 1
            if r.returncode == 1:
                refused += 1
                if not r.stderr.startswith(b"conveyor: error: "):
                    print(f"mutant {i}: a refusal without 'conveyor: error:': {r.stderr[-300:]!r}")
                    bad += 1
print(f"graph cli fuzz: {count} mutated files, {2 * count} runs, {refused} refusals, {bad} failures")
sys.exit(1 if bad else 0)
