#!/usr/bin/env python3
"""Prints, for each test that failed in a ctest run, its name and why, in a few lines.

Usage: scripts/failed-tests.py BUILD_DIR [--lines N]

Reads BUILD_DIR/Testing/Temporary/LastTest.log (ctest writes every test's output there) and
prints, per failed test, the lines of its output that say why (a test script's "FAIL:" line,
a Catch2 failure, a sanitizer's report, a time-out), else its last lines. scripts/test.sh runs
it after a failed stage: the end of a long run's output then names every failure and its
reason, where a reader (or a CI page that keeps only the end) looks first.
"""
import re
import sys

WHY = re.compile(r"^(FAIL\b|FAILED|.*\bFAILED:|.*REQUIRE|.*CHECK\(|==\d+==ERROR|WARNING: ThreadSanitizer|"
                 r".*runtime error:|.*Timeout|.*did not|.*not cleanly|bash: line \d+:)")


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) >= 2 else 2
    lines_per_test = 6
    if "--lines" in argv:
        lines_per_test = int(argv[argv.index("--lines") + 1])
    path = argv[1].rstrip("/") + "/Testing/Temporary/LastTest.log"
    try:
        text = open(path, errors="replace").read().splitlines()
    except OSError as e:
        print(f"failed-tests: cannot read {path}: {e.strerror}", file=sys.stderr)
        return 1
    name, output, in_output, failed = None, [], False, []
    for line in text:
        m = re.match(r"^\d+/\d+ Test: (.*)$", line)
        if m:
            name, output, in_output = m.group(1), [], False
            continue
        if line.startswith("Output:"):
            in_output = True
            continue
        if line == "<end of output>":
            in_output = False
            continue
        if in_output:
            output.append(line)
            continue
        if name and (line.startswith("Test Failed") or line.startswith("Test Not Run")
                     or "Timeout" in line and line.startswith("Test ")):
            failed.append((name, line.strip(), output))
            name = None
    if not failed:
        print("failed-tests: no failed test in " + path)
        return 0
    print(f"== {len(failed)} failed test(s), and why (from {path}):")
    for name, how, output in failed:
        why = [l for l in output if l.strip() and WHY.match(l)]
        why.sort(key=lambda l: 0 if l.startswith("FAIL") else 1)  # a test script's own verdict first
        shown = why[:lines_per_test] if why else [l for l in output if l.strip()][-lines_per_test:]
        print(f"-- {name} ({how})")
        for l in shown:
            print("   " + l[:400])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
