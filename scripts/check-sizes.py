#!/usr/bin/env python3
"""Checks the size rules: no source file over 800 lines, no function over 150 lines.

Usage: scripts/check-sizes.py [--root DIR] [--max-file-lines N] [--max-function-lines N]
  --root DIR               the source tree (default: this script's repository)
  --max-file-lines N       the longest a .cc or .h file may be (default 800)
  --max-function-lines N   the longest a function may be, from the first line of its
                           declaration to its closing brace (default 150)

Checks every .cc and .h file below --root except those in tests/ (at the top), in hidden
folders and in build folders (named build, build-* or build_*, or holding a CMakeCache.txt).

Exits 0 when every file and function fits, 1 naming each one that does not (file:line and its
length), 2 on bad input. A few functions from before the rule are listed in KNOWN_LONG: each is
named but passes while it is no longer than it was.

How functions are found (a heuristic, not a C++ parser):
  - comments, string and character literals and preprocessor lines are blanked first (kept as
    line breaks), so braces in them do not count, and neither do braces in macro definitions;
  - at namespace, class and extern "C" level, a '{' opens a function body when what precedes
    it since the last ';', '{' or '}' ends in ')' (after dropping qualifiers such as const,
    noexcept, override, and trailing ALL-CAPS annotation macros such as EXCLUDES(mu_)), in a
    qualifier, in a trailing return type (-> T), or in a constructor's initializer list; a
    '{' after "namespace", "class", "struct", "union" or extern "C" opens a scope that is
    searched in turn; any other '{' (enum bodies, brace initializers) is skipped whole;
  - a function's body is matched brace by brace; lambdas, local classes and nested blocks in
    it count towards the function, they are not measured on their own; a lambda at namespace
    or class level with a parameter list is measured like a function;
  - its length runs from the first line of what precedes its '{' (template line and
    signature included) to the line of its closing brace.
Limits: code whose braces only balance per preprocessor branch (#if ... { #else ... { #endif)
is reported as a file whose braces do not balance; a function defined by a macro's expansion
is not seen; an unusual declaration (a function whose name is ALL-CAPS, or a macro that
expands to a function's head with no parenthesis before the brace) may be taken for data and
not measured.
"""
import argparse
import os
import re
import sys

SKIP_TOP = {"tests"}
# Functions over the limit from before the rule, each allowed up to the length it had then so it
# cannot grow; an entry that fits the limit again is reported, so the list only shrinks.
KNOWN_LONG = {
}
QUALIFIERS = {"const", "noexcept", "override", "final", "mutable", "volatile", "try", "&", "&&"}


def blank(code):
    """The code with comments, literals and preprocessor lines replaced by spaces; line breaks
    kept, so offsets map to the same lines. A literal keeps its quotes ("" or '')."""
    out = []
    i, n = 0, len(code)
    line_start = True  # only whitespace since the last line break
    while i < n:
        c = code[i]
        if c == "\n":
            out.append(c)
            line_start = True
            i += 1
            continue
        if line_start and c == "#":
            # A preprocessor line, with its backslash continuations.
            while i < n and code[i] != "\n":
                if code[i] == "\\" and i + 1 < n and code[i + 1] == "\n":
                    out.append(" \n")
                    i += 2
                    continue
                out.append(" ")
                i += 1
            continue
        if not c.isspace():
            line_start = False
        if code.startswith("//", i):
            while i < n and code[i] != "\n":
                out.append(" ")
                i += 1
            continue
        if code.startswith("/*", i):
            j = code.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", code[i:j]))
            i = j
            continue
        m = re.compile(r'R"([^()\\ ]{0,16})\(').match(code, i)
        if m and (i == 0 or not (code[i - 1].isalnum() or code[i - 1] == "_") or code[i - 1] in "8uUL"):
            end = code.find(")" + m.group(1) + '"', m.end())
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append('""' + re.sub(r"[^\n]", " ", code[i + 2:j]))
            i = j
            continue
        if c == "'":
            # A digit separator (10'000) when the token before it is a number.
            k = i
            while k > 0 and (code[k - 1].isalnum() or code[k - 1] in "_.'"):
                k -= 1
            if k < i and code[k].isdigit():
                out.append(c)
                i += 1
                continue
        if c in "\"'":
            j = i + 1
            while j < n and code[j] != c and code[j] != "\n":
                j += 2 if code[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + c + " " * (j - i - 2))
            i = j
            continue
        out.append(c)
        i += 1
    return "".join(out)


def match_brace(code, i):
    """The index of the '}' that closes the '{' at i, or -1."""
    depth = 0
    for j in range(i, len(code)):
        if code[j] == "{":
            depth += 1
        elif code[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return -1


def strip_trailer(head):
    """The head without trailing qualifiers and ALL-CAPS annotation macros (with or without an
    argument list), unless only such macros are left."""
    h = head.rstrip()
    while True:
        m = re.search(r"(?:\b[A-Z_][A-Z0-9_]*\s*\([^()]*\)|\b[A-Z_][A-Z0-9_]*|&&|&|\b(?:%s)\b)\s*$"
                      % "|".join(q for q in QUALIFIERS if q[0].isalpha()), h)
        if not m or not h[:m.start()].strip():
            return h
        # noexcept(...) is a qualifier with an argument list.
        h = h[:m.start()].rstrip()
        h = re.sub(r"\bnoexcept\s*$", "", h).rstrip()


def classify(head):
    """'scope', 'function' or 'data' for a '{' preceded by `head` at namespace or class level."""
    h = re.sub(r"^\s*((public|private|protected)\s*:\s*)+", "", head).strip()
    while True:  # nested brace initializers collapsed to {}
        h2 = re.sub(r"\{[^{}]*\}", "{}", h)
        if h2 == h:
            break
        h = h2
    lead = re.sub(r"^(template\s*<.*?>\s*)?(\[\[.*?\]\]\s*)*", "", h, flags=re.S)
    if re.match(r"(inline\s+)?namespace\b", lead) or re.match(r'extern\s*""$', lead):
        return "scope"
    if re.match(r"enum\b", lead):
        return "data"
    t = strip_trailer(h)
    if re.match(r"(class|struct|union)\b", lead) and not t.endswith(")"):
        return "scope"
    if t.endswith(")"):
        return "function"
    if re.search(r"\)\s*(const\s*)?(noexcept\s*)?->\s*[\w:<>,\s*&]+$", h):
        return "function"  # trailing return type
    if re.search(r"\)\s*:\s*[\w:]+\s*[({]", h) and (t.endswith("}") or t.endswith(")")):
        return "function"  # a constructor whose initializer list ends in a brace initializer
    return "data"


def function_name(head):
    h = re.sub(r"^\s*((public|private|protected)\s*:\s*)+", "", head)
    h = re.sub(r"^\s*template\s*<.*?>", "", h, flags=re.S)
    m = re.search(r"(operator\s*(\(\)|[^\s(]+)|[~\w:]+)\s*\(", h)
    return m.group(1) if m else "?"


def long_functions(code, max_lines):
    """(line, name, length) of each function over max_lines, and whether the braces balanced."""
    code = blank(code)
    found = []
    head_start = 0
    depth = 0  # scopes open (namespaces, classes)
    i, n = 0, len(code)
    while i < n:
        c = code[i]
        if c == ";":
            head_start = i + 1
        elif c == "}":
            depth -= 1
            if depth < 0:
                return found, False
            head_start = i + 1
        elif c == "{":
            head = code[head_start:i]
            kind = classify(head)
            if kind == "scope":
                depth += 1
                head_start = i + 1
            else:
                end = match_brace(code, i)
                if end < 0:
                    return found, False
                if kind == "function":
                    lead = len(head) - len(head.lstrip())
                    lead += len(re.match(r"((public|private|protected)\s*:\s*)*", head[lead:]).group(0))
                    first = code.count("\n", 0, head_start + lead) + 1
                    last = code.count("\n", 0, end) + 1
                    if last - first + 1 > max_lines:
                        found.append((first, function_name(head), last - first + 1))
                    head_start = end + 1
                i = end  # data: the head goes on (a brace initializer is part of it)
        i += 1
    return found, depth == 0


def sources(root):
    for dirpath, dirs, files in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        keep = []
        for d in sorted(dirs):
            if d.startswith(".") or (rel_dir == "." and d in SKIP_TOP):
                continue
            if d == "build" or d.startswith(("build-", "build_")):
                continue
            if os.path.exists(os.path.join(dirpath, d, "CMakeCache.txt")):
                continue
            keep.append(d)
        dirs[:] = keep
        for f in sorted(files):
            if f.endswith((".cc", ".h")):
                yield os.path.normpath(os.path.join(rel_dir, f))


def main():
    if "-h" in sys.argv[1:] or "--help" in sys.argv[1:]:
        print(__doc__.strip())
        sys.exit(0)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--max-file-lines", type=int, default=800)
    ap.add_argument("--max-function-lines", type=int, default=150)
    try:
        args = ap.parse_args()
    except SystemExit as e:
        sys.exit(0 if e.code == 0 else 2)
    if not os.path.isdir(args.root):
        print(f"check-sizes: --root {args.root}: not a directory", file=sys.stderr)
        sys.exit(2)
    if args.max_file_lines < 1 or args.max_function_lines < 1:
        print("check-sizes: --max-file-lines and --max-function-lines: positive integers", file=sys.stderr)
        sys.exit(2)
    bad = []
    files = 0
    for rel in sources(args.root):
        files += 1
        with open(os.path.join(args.root, rel), encoding="utf-8", errors="replace") as fh:
            code = fh.read()
        lines = code.count("\n") + (0 if code.endswith("\n") or not code else 1)
        if lines > args.max_file_lines:
            bad.append(f"{rel}:1: the file is {lines} lines (max {args.max_file_lines})")
        found, balanced = long_functions(code, args.max_function_lines)
        known = {name: cap for (path, name), cap in KNOWN_LONG.items() if path == rel}
        for line, name, length in found:
            if length <= known.pop(name, 0):
                print(f"{rel}:{line}: function {name} is {length} lines: a known exception (see KNOWN_LONG)")
                continue
            bad.append(f"{rel}:{line}: function {name} is {length} lines (max {args.max_function_lines})")
        for name in known:
            bad.append(f"{rel}: {name} is listed in KNOWN_LONG but is not over the limit: remove it")
        if not balanced:
            bad.append(f"{rel}:1: braces do not balance outside preprocessor lines: functions not measured")
    for b in bad:
        print(b)
    print(f"check-sizes: {files} files checked: {len(bad)} over the limits")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
