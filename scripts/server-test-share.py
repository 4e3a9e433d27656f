#!/usr/bin/env python3
"""How many of the server tests run with no socket and no PostgreSQL.

Counts `@Test` declarations in Tests/ServerTests (support files aside) by file, in three kinds:
- HTTP and process suites: the file starts a test server, runs the latchkey binary or a cluster;
- PostgreSQL without HTTP: the file opens a database or a test SMTP connection, no server;
- values and in-memory stores: neither (a repository-root path or the test KEK constant from
  TestDatabase is not the house).
Prints the share of all server tests that need neither, and the share among the tests outside the
HTTP and process suites (the service tests, and the house's static checks, beside those suites).
A parameterised test counts once.
"""
import glob
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
HTTP_OR_PROCESS = re.compile(r"TestServer|latchkeyBinary|Process\(|TestCluster")
DATABASE = re.compile(r"TestDatabase\.(?!repositoryRoot|keyEncryptionKeyText)\w+|Scratch|PostgresConnection|TestSMTP")


def main() -> int:
    kinds = {"values and in-memory stores": [], "PostgreSQL without HTTP": [], "HTTP and process suites": []}
    for path in sorted(glob.glob(os.path.join(ROOT, "Tests/ServerTests/**/*.swift"), recursive=True)):
        if "/Support/" in path:
            continue
        text = open(path, encoding="utf-8").read()
        count = len(re.findall(r"@Test\b", text))
        if not count:
            continue
        kind = ("HTTP and process suites" if HTTP_OR_PROCESS.search(text)
                else "PostgreSQL without HTTP" if DATABASE.search(text) else "values and in-memory stores")
        kinds[kind].append((os.path.relpath(path, ROOT), count))
    n = {k: sum(c for _, c in v) for k, v in kinds.items()}
    pure, direct, http = n["values and in-memory stores"], n["PostgreSQL without HTTP"], n["HTTP and process suites"]
    total = pure + direct + http
    print(f"server tests without a socket or PostgreSQL: {pure} of {total} ({pure / max(1, total):.0%})")
    print(f"server tests outside the HTTP and process suites: {pure} of {pure + direct} need neither "
          f"({pure / max(1, pure + direct):.0%}); {http} in HTTP and process suites")
    for title, files in kinds.items():
        print(f"\n{title}:")
        for name, count in files:
            print(f"  {count:4d}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
