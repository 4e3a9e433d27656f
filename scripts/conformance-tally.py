#!/usr/bin/env python3
"""Prints the FIDO2 server conformance tally per item group from the JSON lines the conformance
items write (LATCHKEY_CONFORMANCE_REPORT, set by scripts/test.sh): pass / fail / not run, and every
failing or not-run item with its reason. Exit 1 when an item failed or none ran."""
import json
import sys
from collections import OrderedDict

# The tool's sections, in its order.
SECTIONS = [
    ("MakeCredential Request", "Server-ServerPublicKeyCredentialCreationOptions-"),
    ("MakeCredential Response", "Server-ServerAuthenticatorAttestationResponse-Resp-"),
    ("GetAssertion Request", "Server-ServerPublicKeyCredentialGetOptionsResponse-"),
    ("GetAssertion Response", "Server-ServerAuthenticatorAssertionResponse-"),
    ("Metadata Service Tests", "(Metadata Service)"),
]


def section(group):
    for name, marker in reversed(SECTIONS):
        if marker in group:
            return name
    return "Other"


def order(item_id):
    kind, _, number = item_id.partition("-")
    digits = "".join(ch for ch in number if ch.isdigit())
    return (0 if kind == "P" else 1, int(digits or 0), item_id)


def main(path):
    try:
        lines = [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]
    except FileNotFoundError:
        print(f"conformance tally: {path} does not exist (did the conformance items run?)")
        return 1
    groups = OrderedDict()
    for name, _ in SECTIONS:
        groups[name] = OrderedDict()
    for entry in lines:
        groups.setdefault(section(entry["group"]), OrderedDict()).setdefault(entry["group"], {})[entry["id"]] = entry
    failed = 0
    total = {"pass": 0, "fail": 0, "not run": 0}
    print("FIDO2 server conformance (Latchkey's own offline run of the public test items)")
    for name, by_group in groups.items():
        if not by_group:
            continue
        print(f"\n{name}")
        for group, items in sorted(by_group.items()):
            counts = {"pass": 0, "fail": 0, "not run": 0}
            for entry in items.values():
                counts[entry["outcome"]] = counts.get(entry["outcome"], 0) + 1
                total[entry["outcome"]] = total.get(entry["outcome"], 0) + 1
            print(f"  {group}: {counts['pass']} pass, {counts['fail']} fail, {counts['not run']} not run")
            for item_id in sorted(items, key=order):
                entry = items[item_id]
                if entry["outcome"] != "pass":
                    print(f"    {entry['outcome'].upper()} {item_id} {entry['text']}\n      {entry['detail']}")
            failed += counts["fail"]
    print(f"\nTotal: {total['pass']} pass, {total['fail']} fail, {total['not run']} not run")
    return 1 if failed or not lines else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "data/conformance-results.jsonl"))
