#!/usr/bin/env python3
"""The layer rules of src/, checked over #include lines.

The rules are the two tables under "Layer rules" on docs/architecture.md:
this script reads them from the page, so the page a reader sees is the rule
the build enforces (scripts/test_check_layers.py proves each rule bites).

1. The folder table (| folder | may import |): each folder of src/ (and
   include/sluice/, and src/main.cc) may import only itself and the folders
   of its row, each of which has a row above it; so the folder graph is
   one-way, and only the rows that list app/ may import the composition root.
2. The include table (| files | may not include | except |): a file under a
   listed path may not include what starts with a listed prefix ("quoted"
   project headers, <angled> system headers), except the listed exceptions:
   the admin plane reaches its host only through admin::Backend; auth/ is pure.
3. No include cycle between files anywhere in src/ and include/.
4. No function in src/ over MAX_FUNCTION_LINES lines; in the folders of
   SIZE_CHECKED also no .cc over MAX_FILE_LINES lines and no class or struct
   with more than MAX_CLASS_MEMBERS data members (the client connection: at
   most MAX_CONNECTION_MEMBERS); except the entries of
   NOT_YET_CUT, each of which may not grow past the size recorded there
   (they are the restructure's remaining work: remove an entry once it is
   cut; a stale entry fails the check too).

Exits 1 with one line per violation; prints a summary otherwise.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = "docs/architecture.md"
SECTION = "## Layer rules"

SIZE_CHECKED = ("src/proxy/", "src/admin/", "src/observe/", "src/app/")
MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 80
MAX_CLASS_MEMBERS = 30
MAX_CONNECTION_MEMBERS = 15  # proxy::ClientConnection (issue 31)
# What the restructure has not cut yet: path or "path:function" -> lines now.
NOT_YET_CUT = {
}

INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]', re.M)
TICKED = re.compile(r"`([^`]+)`")


class RuleError(Exception):
    """The tables on the page cannot be read as rules."""


def folder_name(token):
    """A folder as the page writes it -> the name used here: `proxy/` -> proxy,
    `include/sluice/` -> sluice, `src/main.cc` -> main, `tools/ctl/` -> tools/ctl."""
    token = token.strip()
    if token in ("src/main.cc", "main.cc"):
        return "main"
    token = token.rstrip("/")
    if token.startswith("src/"):
        token = token[4:]
    if token in ("include/sluice", "sluice"):
        return "sluice"
    return token


def table_rows(lines, header):
    """The cells of each row of the table whose header row starts with the
    cells `header`; None if the section has no such table."""
    for i, line in enumerate(lines):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.lstrip().startswith("|") and cells[:len(header)] == header:
            rows = []
            for row in lines[i + 2:]:
                if not row.lstrip().startswith("|"):
                    break
                rows.append([c.strip() for c in row.strip().strip("|").split("|")])
            return rows
    return None


def parse_rules(page):
    """(layers, include_rules) from the text of docs/architecture.md.

    layers: folder -> the set of folders it may import, in the page's order.
    include_rules: [(file prefixes, forbidden prefixes, exceptions)], each
    include written as '"x"' (a project header) or '<x' (a system header)."""
    if SECTION not in page:
        raise RuleError(f"{PAGE}: no '{SECTION}' section")
    lines = page[page.index(SECTION):].split("\n")
    end = next((i for i, l in enumerate(lines[1:], 1) if l.startswith("## ")), len(lines))
    lines = lines[:end]
    rows = table_rows(lines, ["folder", "may import"])
    if not rows:
        raise RuleError(f"{PAGE}: no '| folder | may import |' table under '{SECTION}'")
    layers = {}
    for cells in rows:
        folders = [folder_name(t) for t in TICKED.findall(cells[0])]
        allowed = {folder_name(t) for t in TICKED.findall(cells[1])
                   if t.endswith("/") or t == "include/sluice/"}
        if not folders:
            raise RuleError(f"{PAGE}: a folder row names no folder: {cells[0]!r}")
        for f in folders:
            if f in layers:
                raise RuleError(f"{PAGE}: {f}/ has two rows")
            # Only folders of the rows above: the graph is one-way by construction.
            later = sorted(g for g in allowed if g not in layers and g != f)
            if later:
                raise RuleError(f"{PAGE}: {f}/ may import {', '.join(g + '/' for g in later)}, "
                                f"which has no row above it (imports must go one way)")
            layers[f] = allowed - {f}
    rules = []
    for cells in table_rows(lines, ["files", "may not include", "except"]) or []:
        where = TICKED.findall(cells[0])
        banned = [include_key(t) for t in TICKED.findall(cells[1])]
        allowed = [include_key(t) for t in TICKED.findall(cells[2])]
        if not where or not banned:
            raise RuleError(f"{PAGE}: an include rule names no files or no include: {cells!r}")
        rules.append((where, banned, allowed))
    if not rules:
        raise RuleError(f"{PAGE}: no '| files | may not include | except |' table under "
                        f"'{SECTION}'")
    return layers, rules


def include_key(token):
    """`"proxy/"` -> '"proxy/', `<thread>` -> '<thread>': a prefix of how an
    include is written, quoted or angled."""
    token = token.strip()
    if token.startswith('"'):
        return '"' + token.strip('"')
    if token.startswith("<"):
        return token
    raise RuleError(f"{PAGE}: write an include as `\"path\"` or `<header>`, not `{token}`")


def folder_of(path):
    """src/proxy/x.cc -> proxy; src/tools/ctl/x.cc -> tools/ctl; include/sluice/x.h -> sluice."""
    if path.startswith("include/sluice/"):
        return "sluice"
    if path == "src/main.cc":
        return "main"
    parts = path.split("/")
    if parts[0] != "src" or len(parts) < 3:
        return None
    if parts[1] == "tools":
        return "tools/" + parts[2] if len(parts) > 3 else "tools"
    return parts[1]


def target_folder(inc, layers):
    """An include path "proxy/server.h" -> proxy (None: not the project's)."""
    if inc.startswith("sluice/"):
        return "sluice"
    parts = inc.split("/")
    if len(parts) < 2:
        return None
    if parts[0] == "tools":
        return "tools/" + parts[1] if len(parts) > 2 else "tools"
    return parts[0] if parts[0] in layers else None


def resolve(inc, exists):
    for base in ("src", "include"):
        p = base + "/" + inc
        if exists(p):
            return p
    return None


def includes(text):
    """(line, '"x' or '<x>', x) of each #include of a file's text."""
    for m in INCLUDE.finditer(text):
        key = ('"' + m.group(2)) if m.group(1) == '"' else "<" + m.group(2) + ">"
        yield text.count("\n", 0, m.start()) + 1, key, m.group(2)


def check_includes(sources, layers, rules, exists=None):
    """Problems of the include lines of `sources` (path -> text), and the
    project include graph (path -> included paths)."""
    exists = exists or (lambda p: p in sources)
    problems, graph = [], {}
    for path, text in sources.items():
        own = folder_of(path)
        graph[path] = []
        for lineno, key, inc in includes(text):
            where = f"{path}:{lineno}"
            for files, banned, allowed in rules:
                if (any(path.startswith(f) for f in files)
                        and any(key.startswith(b) for b in banned)
                        and not any(key.startswith(a) for a in allowed)):
                    shown = inc if key.startswith('"') else key
                    problems.append(f"{where}: may not include {shown} ({PAGE}, the include "
                                    f"table's row for {', '.join(files)})")
            if not key.startswith('"'):
                continue
            target = resolve(inc, exists)
            if target:
                graph[path].append(target)
            tf = target_folder(inc, layers)
            if tf is None or own is None or tf == own:
                continue
            if own not in layers:
                problems.append(f"{where}: {own}/ has no row in the folder table of {PAGE}")
            elif tf not in layers[own]:
                problems.append(f"{where}: {own}/ may not import {tf}/ ({inc})")
    return problems, graph


def include_cycles(graph):
    problems, color = [], {}

    def dfs(node, stack):
        color[node] = 1
        for nxt in graph.get(node, ()):
            if color.get(nxt) == 1:
                cycle = stack[stack.index(nxt):] + [nxt] if nxt in stack else [node, nxt]
                problems.append("include cycle: " + " -> ".join(cycle))
            elif nxt not in color:
                dfs(nxt, stack + [nxt])
        color[node] = 2

    for node in graph:
        if node not in color:
            dfs(node, [node])
    return problems


def functions(lines):
    """(name, first line, length) of each definition in clang-formatted code:
    a signature starting at column 0 that ends with '{', up to the next '}'
    at column 0."""
    i = 0
    while i < len(lines):
        line = lines[i]
        if (line and not line[0].isspace()
                and not line.startswith(("//", "#", "}", "using", "template<>"))
                and not re.match(r"(struct|class|enum|union|extern|namespace)\b", line)):
            j, sig = i, []
            while j < len(lines):
                sig.append(lines[j].strip())
                if lines[j].rstrip().endswith(("{", ";", "}")):
                    break
                j += 1
            text = " ".join(sig)
            if (j < len(lines) and lines[j].rstrip().endswith("{") and "(" in text
                    and "=" not in text.split("(")[0]):
                k = j + 1
                while k < len(lines) and lines[k] != "}":
                    k += 1
                yield text.split("(")[0].strip(), i + 1, k - i + 1
                i = k
            else:
                i = j
        i += 1


def data_members(lines):
    """(class name, data members) of each class or struct in clang-formatted
    code: the declarations one indent inside its body that end with ';' and
    are not functions, types, aliases or static."""
    joined, i = [], 0
    while i < len(lines):
        line = lines[i]
        if (re.match(r"^\s*(class|struct)\s+\w+", line)
                and not line.rstrip().endswith(("{", ";")) and i + 1 < len(lines)):
            line = line + " " + lines[i + 1].strip()
            i += 1
        joined.append(line)
        i += 1
    stack = []
    for line in joined:
        m = re.match(r"^(\s*)(class|struct)\s+(\w+)[^;]*\{\s*$", line)
        if m:
            stack.append([m.group(3), len(m.group(1)), 0])
            continue
        if not stack:
            continue
        indent = len(line) - len(line.lstrip())
        end = re.match(r"^\s*\}\s*(\w*)\s*;", line)
        if end and indent == stack[-1][1]:
            name, _, count = stack.pop()
            yield name, count
            if end.group(1) and stack:
                stack[-1][2] += 1  # `struct {...} member_;`
            continue
        if indent != stack[-1][1] + 2:
            continue
        text = line.split("//")[0].strip()
        if not text.endswith(";") or re.match(
                r"(using|friend|static|virtual|return|enum|typedef|template|class|struct)\b", text):
            continue
        head = re.split(r"\s*(=|\{)", text, maxsplit=1)[0].rstrip(";").strip()
        if "operator" in head or re.search(r"\)\s*(const)?\s*(override|noexcept)?\s*$", head):
            continue
        stack[-1][2] += 1


def check_sizes(sources):
    problems, seen = [], set()
    for path, text in sources.items():
        if not path.endswith(".cc"):
            continue
        lines = text.split("\n")
        n = len(lines)
        if n > MAX_FILE_LINES and path.startswith(SIZE_CHECKED):
            allowed = NOT_YET_CUT.get(path)
            seen.add(path)
            if allowed is None:
                problems.append(f"{path}: {n} lines (at most {MAX_FILE_LINES})")
            elif n > allowed:
                problems.append(f"{path}: {n} lines, grew past the {allowed} of NOT_YET_CUT")
        for name, first, length in functions(lines):
            if length > MAX_FUNCTION_LINES:
                key = f"{path}:{name}"
                allowed = NOT_YET_CUT.get(key)
                seen.add(key)
                if allowed is None:
                    problems.append(f"{path}:{first}: {name} is {length} lines "
                                    f"(at most {MAX_FUNCTION_LINES})")
                elif length > allowed:
                    problems.append(f"{path}:{first}: {name} is {length} lines, grew past the "
                                    f"{allowed} of NOT_YET_CUT")
    for path, text in sources.items():
        if not path.startswith(SIZE_CHECKED):
            continue
        for name, count in data_members(text.split("\n")):
            limit = MAX_CONNECTION_MEMBERS if name == "ClientConnection" else MAX_CLASS_MEMBERS
            if count > limit:
                problems.append(f"{path}: {name} has {count} data members (at most {limit})")
    for key in NOT_YET_CUT:
        if key not in seen:
            problems.append(f"NOT_YET_CUT: '{key}' is cut or gone: remove its entry")
    return problems


def main():
    os.chdir(ROOT)
    try:
        layers, rules = parse_rules(open(PAGE, encoding="utf-8").read())
    except RuleError as e:
        print(f"check_layers: {e}")
        return 1
    files = subprocess.check_output(
        ["git", "ls-files", "src/*.h", "src/*.cc", "include/*.h"], text=True).split()
    files = [p for p in files if os.path.exists(p)]  # deleted, not yet staged
    sources = {p: open(p, encoding="utf-8").read() for p in files}
    problems, graph = check_includes(sources, layers, rules, os.path.exists)
    problems += include_cycles(graph)
    problems += check_sizes(sources)

    if problems:
        print(f"check_layers: the layer rules are broken ({PAGE}, scripts/check_layers.py):")
        for p in problems:
            print("  " + p)
        return 1
    print(f"check_layers: {len(files)} files, {sum(len(v) for v in graph.values())} project "
          f"includes, no cycle, every import allowed by the {len(layers)} folders and "
          f"{len(rules)} include rules of {PAGE}; {len(NOT_YET_CUT)} oversized entries "
          f"left to cut")
    return 0


if __name__ == "__main__":
    sys.exit(main())
