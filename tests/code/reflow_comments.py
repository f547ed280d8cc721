#!/usr/bin/env python3
"""Re-wraps the comments of C++ headers to a column limit (include/ keeps to 100 columns, issue 41), which
clang-format does not do here (ReflowComments is off: it would merge lists and tables). A paragraph of `//` or `//!`
lines is re-wrapped only when one of its lines is too wide; list items keep a hanging indent; code fences, tables,
`\\code` blocks and empty lines are kept as they are. A trailing `//!<` comment that makes its line too wide moves
above the member as `//!` lines. Code itself is left to clang-format.

Usage: reflow_comments.py LIMIT FILE...   (rewrites the files in place; prints the ones it changed)
"""
import re
import sys
import textwrap

COMMENT = re.compile(r"^(\s*)(//!|//)(?!<)( ?)(.*)$")
TRAILING = re.compile(r"^(\s*)(\S.*?\S)\s+(//!<|//)\s?(.*)$")
LIST_ITEM = re.compile(r"^([-*]|\d+\.)\s+")
BREAKS_PARAGRAPH = re.compile(r"^(\\[a-zA-Z]+\b|\||```|#|\s*$)")


GLUE = "\x00"  # stands for a space inside a `code span` while wrapping: a span is never broken across lines


def glue_spans(text):
    return re.sub(r"`[^`]*`", lambda m: m.group(0).replace(" ", GLUE), text)


def wrap(prefix, first_extra, rest_extra, text, limit):
    width = max(20, limit - len(prefix) - max(len(first_extra), len(rest_extra)))
    lines = textwrap.wrap(glue_spans(text), width=width, break_long_words=False, break_on_hyphens=False)
    out = []
    for i, line in enumerate(lines):
        out.append(f"{prefix}{first_extra if i == 0 else rest_extra}{line}".replace(GLUE, " ").rstrip())
    return out


def paragraphs(block):
    """Splits the texts of a comment block into paragraphs: (kind, lines) with kind 'keep' or 'text'."""
    out, current, in_code = [], None, False
    for text in block:
        stripped = text.strip()
        if stripped.startswith("```") or stripped.startswith("\\code") or stripped.startswith("\\endcode"):
            in_code = not in_code if stripped.startswith("```") else stripped.startswith("\\code")
            out.append(("keep", [text]))
            current = None
            continue
        if in_code or BREAKS_PARAGRAPH.match(stripped) and not stripped.startswith("\\"):
            out.append(("keep", [text]))
            current = None
            continue
        starts_item = LIST_ITEM.match(stripped) or stripped.startswith("\\")
        if stripped.startswith("\\file"):  # \file takes the line: its text is the next paragraph
            out.append(("keep", [text]))
            current = None
            continue
        if current is not None and not starts_item:  # a paragraph, list item or command goes on (Doxygen's rule)
            current[1].append(text)
        else:
            current = ("text", [text])
            out.append(current)
    return out


def reflow_block(indent, marker, texts, limit):
    prefix = f"{indent}{marker} "
    if all(len(prefix + t) <= limit for t in texts):
        return [f"{indent}{marker}{' ' if t else ''}{t}" for t in texts]
    out = []
    for kind, lines in paragraphs(texts):
        too_wide = any(len(prefix + t) > limit for t in lines)
        if kind == "keep" or not too_wide:
            out.extend(f"{indent}{marker}{' ' if t else ''}{t}" for t in lines)
            continue
        first = lines[0]
        lead = len(first) - len(first.lstrip())
        m = LIST_ITEM.match(first.strip())
        command = first.strip().split()[0] if first.strip().startswith("\\") else ""
        hang = " " * lead + (" " * len(m.group(0)) if m else (" " * (len(command) + 1) if command else ""))
        text = " ".join(t.strip() for t in lines)
        out.extend(wrap(prefix, " " * lead, hang, text, limit))
    return out


def reflow(source, limit):
    lines = source.split("\n")
    out, i = [], 0
    while i < len(lines):
        line = lines[i]
        t = TRAILING.match(line)
        if t and len(line) > limit and '"' not in t.group(2) and not t.group(4).startswith("NOLINT"):
            indent, code, kind, text = t.groups()
            held = []
            while out and out[-1].rstrip().endswith(("=", "(", ",")):  # the statement began above: go above it
                held.insert(0, out.pop())
            lead = re.match(r"\s*", held[0]).group(0) if held else indent
            out.extend(wrap(f"{lead}{'//!' if kind == '//!<' else '//'} ", "", "", text, limit))
            out.extend(held)
            out.append(f"{indent}{code}")
            i += 1
            continue
        m = COMMENT.match(line)
        if not m:
            out.append(line)
            i += 1
            continue
        indent, marker = m.group(1), m.group(2)
        texts = []
        while i < len(lines):
            m2 = COMMENT.match(lines[i])
            if not m2 or m2.group(1) != indent or m2.group(2) != marker:
                break
            texts.append(m2.group(4))
            i += 1
        out.extend(reflow_block(indent, marker, texts, limit))
    return "\n".join(out)


def main():
    limit = int(sys.argv[1])
    for path in sys.argv[2:]:
        with open(path, encoding="utf-8") as f:
            before = f.read()
        after = reflow(before, limit)
        if after != before:
            with open(path, "w", encoding="utf-8") as f:
                f.write(after)
            print(path)


if __name__ == "__main__":
    main()
