#!/usr/bin/env python3
"""The API reference as a reader sees it: headless Chromium opens the built site (scripts/check_api_docs.sh) and
checks that the main page, a class page and the namespace page render with their content, and that docs/*.md are
pages of it. Saves a screenshot of each page in SHOT_DIR (CI's log folder).
Usage: api_site.py CHROMIUM HTML_DIR SHOT_DIR. Exit 1 naming the page and what it lacks."""
import html
import os
import re
import subprocess
import sys

chromium, site, shots = sys.argv[1], sys.argv[2], sys.argv[3]
FLAGS = ["--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars", "--no-first-run"]


def rendered_text(page):
    """The page's DOM after Chromium rendered it (scripts run), as text without tags."""
    dom = subprocess.run([chromium, *FLAGS, "--dump-dom", f"file://{site}/{page}"], capture_output=True, text=True,
                         timeout=120).stdout
    if not dom.strip():
        sys.exit(f"api site: Chromium rendered nothing for {page}")
    return html.unescape(re.sub(r"<[^>]+>", "", dom))


def screenshot(page, name):
    path = os.path.join(shots, name)
    if os.path.exists(path):
        os.remove(path)
    subprocess.run([chromium, *FLAGS, "--window-size=1280,1000", f"--screenshot={path}", f"file://{site}/{page}"],
                   capture_output=True, timeout=120)
    with open(path, "rb") as f:
        data = f.read()
    if not data.startswith(b"\x89PNG") or len(data) < 20_000:
        sys.exit(f"api site: the screenshot of {page} ({path}, {len(data)} bytes) is missing or blank")
    print(f"api site: {page} -> {path} ({len(data) // 1024} KiB)")


def expect(page, text, needles):
    flat = " ".join(text.split())
    missing = [n for n in needles if n not in flat]
    if missing:
        sys.exit(f"api site: {page} lacks {missing}")


os.makedirs(shots, exist_ok=True)
# The main page is the README: its title, a first example, set-up commands.
expect("index.html", rendered_text("index.html"),
       ["Conveyor", "Set-up: two commands", "A first example", "conveyor::instantiate"])
# A class page: the include line users write, and its members.
expect("classconveyor_1_1graph__exec.html", rendered_text("classconveyor_1_1graph__exec.html"),
       ["#include <conveyor/execute/graph_exec.hpp>", "launch", "update", "upload"])
# The namespace page lists the free functions.
ns = rendered_text("namespaceconveyor.html")
expect("namespaceconveyor.html", ns, ["capture", "instantiate", "fork", "join", "to_dot", "save", "load"])
# docs/*.md are pages of the site (a page per file, listed in pages.html).
pages = rendered_text("pages.html")
for title in ["Graph files", "API stability in 0.x"]:
    expect("pages.html", pages, [title])
for page, name in [("index.html", "api-main.png"), ("classconveyor_1_1graph__exec.html", "api-class.png"),
                   ("namespaceconveyor.html", "api-namespace.png")]:
    screenshot(page, name)
print("api site: main, class and namespace pages render with their content; docs pages listed")
