#!/usr/bin/env python3
"""How many of the server tests run with no socket and no PostgreSQL.

Counts `@Test` declarations in Tests/ServerTests (support files aside) by file: a file that
starts a test server, opens a database or test SMTP connection, or runs the latchkey binary counts
as needing the house; the rest run on values and in-memory stores alone. Prints the two counts,
the share, and the files of each kind with their test counts. A parameterised test counts once.
"""
import glob
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
NEEDS_THE_HOUSE = re.compile(r"TestServer|TestDatabase|Scratch|PostgresConnection|TestSMTP|latchkeyBinary|Process\(|TestCluster")


def main() -> int:
    pure, house = [], []
    for path in sorted(glob.glob(os.path.join(ROOT, "Tests/ServerTests/**/*.swift"), recursive=True)):
        if "/Support/" in path:
            continue
        text = open(path, encoding="utf-8").read()
        count = len(re.findall(r"@Test\b", text))
        if count:
            (house if NEEDS_THE_HOUSE.search(text) else pure).append((os.path.relpath(path, ROOT), count))
    p, h = sum(n for _, n in pure), sum(n for _, n in house)
    print(f"server tests without a socket or PostgreSQL: {p} of {p + h} ({p / max(1, p + h):.0%})")
    for title, files in (("without", pure), ("with", house)):
        print(f"\n{title} the house:")
        for name, n in files:
            print(f"  {n:4d}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
