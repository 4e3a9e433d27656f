#!/usr/bin/env python3
"""Every shell example in the docs runs (issue 25, point 5).

Scans README.md and docs/**/*.md for fenced blocks whose info string starts with `sh`:
  ```sh run               runs, in order, in one bash per page (`set -euo pipefail`), against the dev
                          server scripts/doc-examples.sh started ($LATCHKEY_URL, $ADMIN_KEY, DATABASE_URL,
                          `latchkey` on PATH); a non-zero exit fails the page
  ```sh norun: <reason>   does not run here, and says why (production infrastructure, an
                          authenticator's response, a long run) and which test covers it
A bare ```sh block fails the check: every shell example is either run or says why not.
usage: run_examples.py [--list]
"""
import glob
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def blocks(path):
    """(line, info, code) for every fenced block."""
    out, info, start, code = [], None, 0, []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            stripped = line.rstrip("\n")
            if info is None and stripped.startswith("```"):
                info, start, code = stripped[3:].strip(), n, []
            elif info is not None and stripped.startswith("```"):
                out.append((start, info, "\n".join(code)))
                info = None
            elif info is not None:
                code.append(stripped)
    return out


def pages():
    files = [os.path.join(REPO, "README.md")] + sorted(glob.glob(os.path.join(REPO, "docs", "**", "*.md"), recursive=True))
    return [f for f in files if os.path.exists(f)]


def main():
    listing = "--list" in sys.argv
    failures, ran, skipped = [], 0, []
    for page in pages():
        rel = os.path.relpath(page, REPO)
        runnable = []
        for line, info, code in blocks(page):
            words = info.split(None, 1)
            if not words or words[0] not in ("sh", "bash", "shell", "console"):
                continue
            rest = words[1] if len(words) > 1 else ""
            if rest == "run":
                runnable.append((line, code))
            elif rest.startswith("norun:") and rest[len("norun:"):].strip():
                skipped.append(f"{rel}:{line}: {rest[len('norun:'):].strip()}")
            else:
                failures.append(f"{rel}:{line}: a ```{info} block is neither `sh run` nor `sh norun: <reason>`")
        if listing or not runnable:
            ran += len(runnable)
            continue
        script = ["set -euo pipefail"]
        for line, code in runnable:
            script += [f"echo '--- {rel}:{line}' >&2", code]
        run = subprocess.run(["bash", "-c", "\n".join(script)], cwd=REPO, capture_output=True, text=True, timeout=120)
        ran += len(runnable)
        status = "ok  " if run.returncode == 0 else "FAIL"
        print(f"{status} {rel}: {len(runnable)} block(s)")
        if run.returncode != 0:
            last = [l for l in run.stderr.splitlines() if l.startswith("--- ")]
            failures.append(f"{rel}: exit {run.returncode} in the block at {last[-1][4:] if last else '?'}")
            print("     stdout: " + run.stdout[-1500:].replace("\n", "\n     "))
            print("     stderr: " + run.stderr[-1500:].replace("\n", "\n     "))
    print(f"doc examples: {ran} block(s) run, {len(skipped)} not run (each says why):")
    for s in skipped:
        print("  norun " + s)
    for f in failures:
        print("FAIL " + f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
