#!/usr/bin/env python3
"""Checks the README and docs/ (python3, standard library only).

Fails, naming the file and line of each problem, when:
  - README.md has more than 300 lines (it is the front door; the detail
    belongs in docs/);
  - a relative link in README.md or docs/**/*.md does not resolve to a file
    or folder inside the repository, or its #anchor is not a heading (or an
    explicit <a id/name>) of the target, by GitHub's slug rules;
  - a word that looks like a commit hash appears in README.md or docs/
    outside docs/lab-notes/ (user pages say what is true now; the history,
    with its builds, is in the lab notes);
  - `../shared/`, which is outside the repository, is mentioned at all.

A commit-hash-looking word: 7 to 40 hex digits, lower case, with at least
one digit and at least one letter a-f, not part of a longer word (letters,
digits and `_` around it; `..` between two hashes is a boundary). Hex words
that are not sluice's history can be allowed per file in ALLOWED_HEX.

    python3 scripts/check_docs.py [REPO_ROOT]
"""
import os
import re
import sys
import unicodedata

MAX_README_LINES = 300
# Per file: hex words that may stay. docs/llm-d-flow-control.md is a research
# note that cites the upstream sources it was written from (llm-d, GIE and
# vLLM commits): citations of other projects, not sluice builds.
ALLOWED_HEX = {
    "docs/llm-d-flow-control.md": {
        "ebab687927f5331c1b39defcb579a07951bce56c", "520af47", "84436a9", "c489161c",
        "81d7f460", "01230b40", "dba83d52", "0097c7ed", "b4622cf9",
    },
}

HASH = re.compile(r"(?<![0-9A-Za-z_])[0-9a-f]{7,40}(?![0-9A-Za-z_])")
INLINE_LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
REF_DEF = re.compile(r"^\s{0,3}\[([^\]]+)\]:\s*(<[^>]*>|\S+)")
FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"<a\s+[^>]*(?:id|name)\s*=\s*[\"']([^\"']+)[\"']", re.I)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def is_hash(word, rel):
    return (word not in ALLOWED_HEX.get(rel.replace(os.sep, "/"), ())
            and re.search(r"[0-9]", word) is not None and re.search(r"[a-f]", word) is not None)


def blank_code_spans(line):
    """The line with inline code spans replaced by spaces (same length)."""
    out, i = [], 0
    while i < len(line):
        if line[i] == "`":
            n = len(line[i:]) - len(line[i:].lstrip("`"))
            ticks = line[i:i + n]
            end = line.find(ticks, i + n)
            if end != -1 and line[end:end + n] == ticks and line[end + n:end + n + 1] != "`":
                out.append(" " * (end + n - i))
                i = end + n
                continue
            out.append(ticks)
            i += n
            continue
        out.append(line[i])
        i += 1
    return "".join(out)


def prose_lines(text):
    """(line number, line) of the lines outside fenced code blocks."""
    fence = None
    for n, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if fence is None:
            if m:
                fence = m.group(1)
                continue
            yield n, line
        elif m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) \
                and line.strip() == m.group(1):
            fence = None


def heading_text(raw):
    """A heading's text as GitHub renders it, before slugging."""
    t = re.sub(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\([^)]*\)", r"\1", raw)  # links: their text
    t = re.sub(r"<[^>]+>", "", t)  # inline HTML tags
    return t


def slug(text):
    """GitHub's anchor for a heading (github-slugger): lower case; every
    character but letters, digits, marks, `_`, `-` and spaces removed;
    spaces become hyphens."""
    out = []
    for ch in text.lower():
        cat = unicodedata.category(ch)
        if ch in "-_" or ch == " " or cat[0] in "LM" or cat == "Nd":
            out.append("-" if ch == " " else ch)
    return "".join(out)


_anchor_cache = {}


def anchors(path):
    if path not in _anchor_cache:
        seen, result = {}, set()
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for _, line in prose_lines(text):
            for a in HTML_ANCHOR.findall(line):
                result.add(a)
            m = HEADING.match(line)
            if not m:
                continue
            base = slug(heading_text(m.group(2)))
            k = seen.get(base, 0)
            seen[base] = k + 1
            result.add(base if k == 0 else f"{base}-{k}")
        _anchor_cache[path] = result
    return _anchor_cache[path]


def check_link(root, src, lineno, target, problems):
    if target.startswith("<") and target.endswith(">"):
        target = target[1:-1]
    if not target or SCHEME.match(target) or target.startswith("//"):
        return  # http(s), mailto and other absolute links are not checked
    path, _, anchor = target.partition("#")
    path = path.split("?", 1)[0]
    rel = os.path.relpath(src, root)
    if path:
        if path.startswith("/"):
            dest = os.path.normpath(os.path.join(root, path.lstrip("/")))
        else:
            dest = os.path.normpath(os.path.join(os.path.dirname(src), path))
        if os.path.commonpath([root, dest]) != root:
            problems.append(f"{rel}:{lineno}: link '{target}' leaves the repository")
            return
        if not os.path.exists(dest):
            problems.append(f"{rel}:{lineno}: link '{target}': {os.path.relpath(dest, root)} does not exist")
            return
    else:
        dest = src
    if anchor:
        if os.path.isdir(dest) or not dest.endswith(".md"):
            return  # anchors into folders and non-markdown files are not checked
        if anchor not in anchors(dest):
            problems.append(f"{rel}:{lineno}: link '{target}': no heading with the anchor "
                            f"#{anchor} in {os.path.relpath(dest, root)}")


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    problems = []
    readme = os.path.join(root, "README.md")
    docs = os.path.join(root, "docs")
    lab_notes = os.path.join(docs, "lab-notes")

    with open(readme, encoding="utf-8") as f:
        n = len(f.read().splitlines())
    if n > MAX_README_LINES:
        problems.append(f"README.md: {n} lines, more than {MAX_README_LINES}: move the detail to docs/")

    pages = [readme]
    others = []  # other files under docs/, scanned for hashes only
    for d, dirs, files in os.walk(docs):
        dirs.sort()
        for name in sorted(files):
            (pages if name.endswith(".md") else others).append(os.path.join(d, name))

    for path in pages + others:
        rel = os.path.relpath(path, root)
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except UnicodeDecodeError:
            continue  # not text
        history = os.path.commonpath([lab_notes, path]) == lab_notes
        for lineno, line in enumerate(text.split("\n"), 1):
            if "../shared" in line:
                problems.append(f"{rel}:{lineno}: '../shared' is outside the repository: "
                                "describe it or link the repository's own pages")
            if not history:
                for m in HASH.finditer(line):
                    if is_hash(m.group(0), rel):
                        problems.append(f"{rel}:{lineno}: '{m.group(0)}' looks like a commit hash: "
                                        "builds and history belong in docs/lab-notes/")
        if not path.endswith(".md"):
            continue
        for lineno, line in prose_lines(text):
            line = blank_code_spans(line)
            for m in INLINE_LINK.finditer(line):
                check_link(root, path, lineno, m.group(2), problems)
            m = REF_DEF.match(line)
            if m:
                check_link(root, path, lineno, m.group(2), problems)

    if problems:
        print("check_docs: %d problem(s):" % len(problems), file=sys.stderr)
        for p in problems:
            print("  " + p, file=sys.stderr)
        return 1
    print(f"check_docs: ok (README.md {n} lines; {len(pages)} pages; links, anchors and hashes checked)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
