#!/usr/bin/env python3
"""The layer rules of src/ (docs/architecture.md), checked over #include lines.

1. Each folder of src/ may import only the folders listed for it in LAYERS
   (and itself); `sluice/...` is the public plugin API in include/.
2. The folder graph LAYERS is itself one-way (no cycle), so imports between
   folders go one way.
3. Nothing imports src/app/ but src/main.cc.
4. No include cycle between files anywhere in src/ and include/.
5. No function in src/ over MAX_FUNCTION_LINES lines; in the folders of
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

# folder -> the folders it may import (besides itself). "sluice" is include/sluice.
LAYERS = {
    "sluice": set(),
    "protocol": set(),
    "auth": {"config", "protocol", "sluice"},
    "config": {"protocol", "sluice"},
    "registry": {"sluice"},
    "datalayer": {"config", "sluice"},
    "scheduling": {"config", "datalayer", "sluice"},
    "flowcontrol": {"config", "registry", "scheduling", "sluice"},
    "fleet": {"flowcontrol", "sluice"},
    "extensions": {"config", "flowcontrol", "scheduling", "sluice"},
    "observe": {"flowcontrol", "sluice"},
    "proxy": {"protocol", "auth", "observe", "config", "datalayer", "registry", "scheduling",
              "flowcontrol", "fleet", "sluice"},
    "admin": {"protocol", "auth", "observe", "proxy", "config", "datalayer", "registry",
              "scheduling", "flowcontrol", "fleet", "sluice"},
    "app": {"protocol", "auth", "observe", "proxy", "admin", "config", "datalayer", "registry",
            "scheduling", "flowcontrol", "fleet", "extensions", "sluice"},
    "tools/ctl": set(),
    "tools/load": {"config"},
    "tools/mock": {"protocol", "config"},
    "tools": {"tools/load", "config"},  # sluice-load's main
    "main": {"app", "config", "observe"},
}

SIZE_CHECKED = ("src/proxy/", "src/admin/", "src/observe/", "src/app/")
MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 80
MAX_CLASS_MEMBERS = 30
MAX_CONNECTION_MEMBERS = 15  # proxy::ClientConnection (issue 31)
# What the restructure has not cut yet: path or "path:function" -> lines now.
NOT_YET_CUT = {
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


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


def target_folder(inc):
    """An include path "proxy/server.h" -> proxy (None: not the project's)."""
    if inc.startswith("sluice/"):
        return "sluice"
    parts = inc.split("/")
    if len(parts) < 2:
        return None
    if parts[0] == "tools":
        return "tools/" + parts[1] if len(parts) > 2 else "tools"
    return parts[0] if parts[0] in LAYERS else None


def resolve(inc):
    for base in ("src", "include"):
        p = os.path.join(base, inc)
        if os.path.exists(os.path.join(ROOT, p)):
            return p
    return None


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


def main():
    os.chdir(ROOT)
    files = subprocess.check_output(
        ["git", "ls-files", "src/*.h", "src/*.cc", "include/*.h"], text=True).split()
    problems = []

    # 2. The folder graph is one-way.
    state = {}

    def visit(f, stack):
        state[f] = 1
        for g in LAYERS.get(f, ()):
            if state.get(g) == 1:
                problems.append("layers: folder cycle " + " -> ".join(stack + [f, g]))
            elif g not in state:
                visit(g, stack + [f])
        state[f] = 2

    for f in LAYERS:
        if f not in state:
            visit(f, [])

    graph = {}
    for path in files:
        src = open(path, encoding="utf-8").read()
        own = folder_of(path)
        graph[path] = []
        for lineno, inc in ((src.count("\n", 0, m.start()) + 1, m.group(1))
                            for m in INCLUDE.finditer(src)):
            target = resolve(inc)
            if target:
                graph[path].append(target)
            tf = target_folder(inc)
            if tf is None or own is None:
                continue
            where = f"{path}:{lineno}"
            if tf == "app" and own not in ("main", "app"):
                problems.append(f"{where}: imports {inc}: only src/main.cc may import app/")
            elif tf != own and tf not in LAYERS.get(own, set()):
                problems.append(f"{where}: {own}/ may not import {tf}/ ({inc})")

    # 4. No include cycle between files.
    color = {}

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

    # 5. Sizes.
    seen = set()
    for path in files:
        if not path.endswith(".cc"):
            continue
        lines = open(path, encoding="utf-8").read().split("\n")
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
    for path in files:
        if not path.startswith(SIZE_CHECKED):
            continue
        lines = open(path, encoding="utf-8").read().split("\n")
        for name, count in data_members(lines):
            limit = MAX_CONNECTION_MEMBERS if name == "ClientConnection" else MAX_CLASS_MEMBERS
            if count > limit:
                problems.append(f"{path}: {name} has {count} data members (at most {limit})")
    for key in NOT_YET_CUT:
        if key not in seen:
            problems.append(f"NOT_YET_CUT: '{key}' is cut or gone: remove its entry")

    if problems:
        print("check_layers: the layer rules are broken (scripts/check_layers.py):")
        for p in problems:
            print("  " + p)
        return 1
    print(f"check_layers: {len(files)} files, {sum(len(v) for v in graph.values())} project "
          f"includes, no cycle, every import allowed; {len(NOT_YET_CUT)} oversized entries "
          f"left to cut")
    return 0


if __name__ == "__main__":
    sys.exit(main())
