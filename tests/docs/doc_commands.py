#!/usr/bin/env python3
"""Every `conveyor ...` command in README.md and docs/*.md, run as a reader would copy it.

Commands come from shell blocks (```sh, ```bash, ```console or unmarked) whose lines start with `conveyor` or
`build/bin/conveyor`, and from inline code spans in the prose (a span may wrap across lines). Without a GPU each must
succeed or stop at the GPU check ("no CUDA device"); a command the page marks `<!-- doc-test: refused -->` on its line
must be refused instead (exit status 2 or 1, without reaching the GPU check). "Fewer GPUs than asked for" counts as
the GPU check. Not run, and counted as such:
templates (placeholders such as <name>, [optional], a|b, FILE, N, ...), commands that read ../shared/data when it is
absent, and mentions of a subcommand alone (`conveyor filter`: its --help is run instead). Commands run in a scratch
folder beside a link to ../shared, so that the pages' relative paths hold and nothing is written into the tree.

Usage: doc_commands.py CONVEYOR_BINARY SOURCE_DIR [FILE.md ...]
Exit status: 0 when every command behaved, 1 otherwise (each failure printed with its page and line).
"""
import glob
import os
import re
import shlex
import subprocess
import sys
import tempfile

INLINE = re.compile(r"`((?:build/bin/)?conveyor\s[^`]+)`")
PLACEHOLDER = re.compile(r"<[^>]*>|\[[^\]]*\]|\||\.\.\.|…|\b(FILE|N|DIR|PATH|K)\b")
SHELL_BLOCKS = {"sh", "bash", "console", "shell", ""}


def commands_of(path):
    """(line, command, refused) for every command of one page."""
    out = []
    lines = open(path, encoding="utf-8").read().split("\n")
    in_block = None
    prose = []  # (line number, text) of the prose between blocks

    def flush_prose():
        if not prose:
            return
        text = "\n".join(t for _, t in prose)
        starts = []
        offset = 0
        for number, t in prose:
            starts.append((offset, number))
            offset += len(t) + 1
        for m in INLINE.finditer(text):
            number = max(n for o, n in starts if o <= m.start())
            line_text = lines[number - 1]
            out.append((number, " ".join(m.group(1).split()), "doc-test: refused" in line_text))
        prose.clear()

    for number, line in enumerate(lines, 1):
        if line.lstrip().startswith("```"):
            if in_block is None:
                flush_prose()
                in_block = line.lstrip()[3:].strip()
            else:
                in_block = None
            continue
        if in_block is not None:
            if in_block in SHELL_BLOCKS:
                text = line.split("#", 1)[0].strip() if " #" in line else line.strip()
                if re.match(r"^(build/bin/)?conveyor\s", text):
                    out.append((number, text, "doc-test: refused" in line))
            continue
        prose.append((number, line))
    flush_prose()
    return out


def run(binary, source, pages):
    shared = os.path.join(os.path.dirname(os.path.abspath(source)), "shared")
    have_shared = os.path.isdir(os.path.join(shared, "data"))
    checked = templates = absent = mentions = 0
    failures = []
    with tempfile.TemporaryDirectory() as scratch:
        work = os.path.join(scratch, "project")
        os.mkdir(work)
        if have_shared:
            os.symlink(shared, os.path.join(scratch, "shared"))
        for page in pages:
            for number, command, refused in commands_of(page):
                where = f"{os.path.relpath(page, source)}:{number}"
                if PLACEHOLDER.search(command):
                    templates += 1
                    continue
                if "../shared" in command and not have_shared:
                    absent += 1
                    continue
                argv = shlex.split(command)
                argv[0] = binary
                if len(argv) == 2 and not argv[1].startswith("-"):  # a mention of a subcommand
                    argv.append("--help")
                    mentions += 1
                try:
                    p = subprocess.run(argv, cwd=work, capture_output=True, text=True, timeout=60,
                                       env=dict(os.environ, CUDA_VISIBLE_DEVICES=os.environ.get(
                                           "CONVEYOR_DOC_TEST_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES", ""))))
                except subprocess.TimeoutExpired:
                    failures.append(f"{where}: `{command}` did not end within 60 s")
                    continue
                output = p.stdout + p.stderr
                # The GPU check: no device at all, or fewer than the command asks for (--gpus N).
                reached_gpu = "no CUDA device" in output or "CUDA device(s) are visible" in output
                if refused:
                    ok = p.returncode != 0 and not reached_gpu
                    why = "was not refused" if p.returncode == 0 else "reached the GPU check instead of refusing"
                else:
                    ok = p.returncode == 0 or (p.returncode == 1 and reached_gpu)
                    why = f"exit status {p.returncode}"
                checked += 1
                if not ok:
                    last = [l for l in output.strip().split("\n") if l][-2:]
                    failures.append(f"{where}: `{command}`: {why}: {' | '.join(last)}")
    print(f"doc commands: {checked} run, {templates} templates, {mentions} subcommand mentions (run with --help), "
          f"{absent} left out (../shared/data absent), {len(failures)} failed")
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    binary, source = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    pages = sys.argv[3:] or [os.path.join(source, "README.md")] + sorted(glob.glob(os.path.join(source, "docs", "*.md")))
    return run(binary, source, pages)


if __name__ == "__main__":
    sys.exit(main())
