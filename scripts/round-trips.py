#!/usr/bin/env python3
"""Holds every route to its round trips to PostgreSQL (ARCHITECTURE.md "Round trips per route").

Reads the log the HTTP suites' test servers write with LATCHKEY_ROUND_TRIP_LOG (one JSON line per
request: route, method, status, reads, writes, control) and, per route, takes what a successful
request typically costs: the median reads, writes and control among its 2xx answers (a cache
reloading now and then, or a stale revocation feed's check, is not the route's own cost). The
default budget is one read, one write and no transaction control (SPEC "Performance targets" →
"Round trips"); a route above it must be listed in ARCHITECTURE.md's table with its figures and
its reason, and may not cost more than listed. A listed route that now does better is reported, so
the table is lowered with it.

The bulk routes (an export, an import) are counted per account: a figure written `1 + 1 per account`
or `1 + 1 per 500 accounts` is that many round trips plus one for each account (or each started page
of accounts). Their answers are JSON Lines, one line an account, and the log line of such an answer
carries `items`, its count of lines; each of their successful requests is held to its own figure.

usage: round-trips.py <log.jsonl> [ARCHITECTURE.md]
"""
import collections
import json
import re
import sys


CELL = r'(\d+(?:\s*\+\s*\d+\s+per\s+(?:\d+\s+)?accounts?)?|\d+\s+per\s+(?:\d+\s+)?accounts?)'


def cell(text):
    """A figure of the table: (fixed, per, every), `1 + 1 per 500 accounts` → (1, 1, 500)."""
    m = re.fullmatch(r'(?:(\d+)\s*\+\s*)?(\d+)\s+per\s+(?:(\d+)\s+)?accounts?', text.strip())
    if m:
        return (int(m.group(1) or 0), int(m.group(2)), int(m.group(3) or 1))
    return (int(text), 0, 1)


def allowed(figure, items):
    fixed, per, every = figure
    return fixed + per * -(-max(items, 0) // every)


def budgets(path):
    text = open(path, encoding='utf-8').read()
    start = text.find('## Round trips per route')
    if start < 0:
        sys.exit('round-trips: ARCHITECTURE.md has no "## Round trips per route" section')
    section = text[start:]
    end = section.find('\n## ', 5)
    section = section if end < 0 else section[:end]
    listed = {}
    for line in section.splitlines():
        m = re.match(r'\|\s*`(GET|POST|PUT|PATCH|DELETE) ([^`]+)`\s*\|\s*' + CELL + r'\s*\|\s*' + CELL + r'\s*\|\s*(\d+)\s*\|\s*(.+?)\s*\|\s*$', line)
        if m:
            reads, writes = cell(m.group(3)), cell(m.group(4))
            if reads[1] or writes[1]:
                listed[(m.group(1), m.group(2))] = ('per account', reads, writes, int(m.group(5)), m.group(6))
            else:
                listed[(m.group(1), m.group(2))] = (reads[0], writes[0], int(m.group(5)), m.group(6))
    return listed


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    log = sys.argv[1]
    architecture = sys.argv[2] if len(sys.argv) > 2 else 'ARCHITECTURE.md'
    listed = budgets(architecture)
    seen = collections.defaultdict(list)
    for line in open(log, encoding='utf-8'):
        r = json.loads(line)
        if 200 <= r['status'] < 300 and r['route'] not in ('unmatched', 'preflight'):
            seen[(r['method'], r['route'])].append((r['reads'], r['writes'], r['control'], r.get('items')))
    failures, lowered = [], []
    within = 0
    for key in sorted(seen):
        runs = seen[key]
        if key in listed and listed[key][0] == 'per account':
            _, reads_figure, writes_figure, control_budget, why = listed[key]
            over = [r for r in runs if r[3] is None or r[0] > allowed(reads_figure, r[3])
                    or r[1] > allowed(writes_figure, r[3]) or r[2] > control_budget]
            if over:
                r = over[0]
                failures.append(f'{key[0]} {key[1]}: {r[0]} read(s), {r[1]} write(s), {r[2]} control for {r[3]} line(s) '
                                f'(listed per account: {why}; {len(over)} of {len(runs)} requests over)')
            else:
                within += 1
            continue
        reads, writes, control = (sorted(r[i] for r in runs)[(len(runs) - 1) // 2] for i in range(3))
        budget = listed.get(key, (1, 1, 0, 'the default'))
        if reads > budget[0] or writes > budget[1] or control > budget[2]:
            failures.append(f'{key[0]} {key[1]}: {reads} read(s), {writes} write(s), {control} control '
                            f'(at most {budget[0]}/{budget[1]}/{budget[2]}: {budget[3]}; {len(seen[key])} requests)')
        elif key in listed and (reads, writes, control) < tuple(budget[:3]):
            lowered.append(f'{key[0]} {key[1]}: {reads}/{writes}/{control}, listed {budget[0]}/{budget[1]}/{budget[2]}')
        else:
            within += 1
    for key in sorted(listed):
        if key not in seen:
            lowered.append(f'{key[0]} {key[1]}: listed, but no successful request reached it')
    print(f'round-trips: {len(seen)} routes answered 2xx; {within} within their budget, {len(listed)} listed exceptions')
    for line in lowered:
        print(f'round-trips: better than listed (lower the table): {line}')
    for line in failures:
        print(f'round-trips: OVER: {line}')
    sys.exit(1 if failures else 0)


if __name__ == '__main__':
    main()
