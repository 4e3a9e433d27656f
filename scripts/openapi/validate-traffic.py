#!/usr/bin/env python3
"""Validates the responses the HTTP suites received against the OpenAPI document, with openapi-core.

    validate-traffic.py TRAFFIC.jsonl [--document Sources/LatchkeyServer/OpenAPI/openapi.json]

TRAFFIC.jsonl is what the Swift suites' test client wrote with LATCHKEY_OPENAPI_TRAFFIC set (one
line per exchange: method, target, status, contentType, body). Each response to an operation the
document has must be documented there: its status, its content type and its body's schema (a
problem's `code` among the ones that operation lists). Requests to paths or methods the document
does not have (the suites probe unknown paths and wrong methods on purpose: 404 / 405 from the
router) and HEAD / OPTIONS are counted, not validated. Exits 1 on any mismatch, printing each kind
once with a count and an example.
"""
import argparse
import collections
import json
import pathlib
import sys
import urllib.parse

from openapi_core import Config, OpenAPI
from openapi_core.templating.paths.exceptions import OperationNotFound, PathNotFound
from openapi_core.testing import MockRequest, MockResponse

REPO = pathlib.Path(__file__).resolve().parents[2]
DOCUMENT = {}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("traffic")
    parser.add_argument("--document", default=str(REPO / "Sources/LatchkeyServer/OpenAPI/openapi.json"))
    args = parser.parse_args()
    # RFC 9457 problem documents are JSON too; the web app's files and JSON Lines (export, import) are text.
    text = lambda body, **_: body.decode("utf-8") if isinstance(body, bytes) else body
    config = Config(extra_media_type_deserializers={"application/problem+json": json.loads, "text/html": text,
                                                    "application/jsonl": text,
                                                    "text/javascript": text, "text/css": text})
    api = OpenAPI.from_file_path(args.document, config=config)
    global DOCUMENT
    DOCUMENT = json.loads(pathlib.Path(args.document).read_text(encoding="utf-8"))
    validated = 0
    skipped = collections.Counter()
    failures = collections.OrderedDict()
    per_operation = collections.Counter()
    # The suites send many exchanges byte for byte alike (the same refusal, the same options): each
    # distinct line is validated once and counted as often as it was received.
    with open(args.traffic, encoding="utf-8") as f:
        received = collections.Counter(line for line in f if line.strip())
    for line, times in received.items():
        x = json.loads(line)
        method = x["method"].upper()
        if method in ("HEAD", "OPTIONS"):
            skipped["HEAD/OPTIONS"] += times
            continue
        parts = urllib.parse.urlsplit(x["target"])
        if any(segment in (".", "..") for segment in parts.path.split("/")):
            # openapi-core resolves dot segments before matching; the server matches them as sent.
            skipped["a `.` or `..` path segment"] += times
            continue
        query = dict(urllib.parse.parse_qsl(parts.query, keep_blank_values=True))
        if parts.path in DOCUMENT["paths"] and method.lower() not in DOCUMENT["paths"][parts.path]:
            # A literal path owns every method (the router's rule, and OpenAPI's): 405 from the
            # router, where openapi-core would fall back to a templated path.
            skipped["not an operation of the document (unknown path or method)"] += times
            continue
        request = MockRequest("http://127.0.0.1", method.lower(), parts.path or "/", args=query)
        content_type = x.get("contentType") or ""
        body = x.get("body", "").encode("utf-8")
        response = MockResponse(body, status_code=x["status"], content_type=content_type or None)
        try:
            api.validate_response(request, response)
        except (PathNotFound, OperationNotFound):
            skipped["not an operation of the document (unknown path or method)"] += times
            continue
        except Exception as error:  # every other failure is a mismatch with the document
            cause = error.__cause__ or error
            errors = getattr(cause, "schema_errors", None)
            if errors:
                # Grouped by where in the body and which keyword failed; the message shows one case.
                detail = "; ".join(f"{'/'.join(map(str, e.absolute_path)) or '(body)'}: {e.validator}" for e in errors)
                message = "; ".join(e.message[:200] for e in errors)
            else:
                detail = str(cause).splitlines()[0][:300] if str(cause) else type(cause).__name__
                message = ""
            # The operation, as the document names it, for grouping.
            template = find_template(api, method, parts.path)
            key = (f"{method} {template}", x["status"], type(cause).__name__, detail)
            entry = failures.setdefault(key, {"count": 0, "example": x, "message": message})
            entry["count"] += times
            continue
        validated += times
        per_operation[f"{method} {find_template(api, method, parts.path)}"] += times
    documented = sum(1 for _ in operations(api))
    print(f"openapi traffic: {validated} responses validated against the document, covering {len(per_operation)} of "
          f"{documented} operations")
    uncovered = sorted(f"{m} {p}" for m, p in operations(api) if f"{m} {p}" not in per_operation)
    if uncovered:
        print(f"openapi traffic: operations no suite's response reached: {', '.join(uncovered)}")
    for reason, count in skipped.items():
        print(f"openapi traffic: {count} skipped: {reason}")
    for (operation, status, kind, detail), entry in failures.items():
        example = entry["example"]
        print(f"MISMATCH {operation} → {status} ({entry['count']}×) {kind}: {detail}")
        if entry["message"]:
            print(f"    {entry['message']}")
        print(f"    e.g. {example['method']} {example['target'][:160]} → {example['status']} "
              f"{example.get('contentType')}: {example.get('body', '')[:300]}")
    print(f"openapi traffic: {validated} passed, {sum(e['count'] for e in failures.values())} failed")
    if validated == 0:
        print("openapi traffic: no response was validated (was LATCHKEY_OPENAPI_TRAFFIC set for the suites?)")
        return 1
    return 1 if failures else 0


def operations(api):
    for path, item in DOCUMENT["paths"].items():
        for method in item:
            if method in ("get", "put", "post", "delete", "patch", "head", "options", "trace"):
                yield method.upper(), path


_templates = {}


def find_template(api, method, path):
    """The document's path template this request matched (the same rule openapi-core uses, simplified)."""
    key = (method, path)
    if key not in _templates:
        segments = path.split("/")
        best = None
        for m, template in operations(api):
            if m != method:
                continue
            t = template.split("/")
            if len(t) != len(segments):
                continue
            if all(a.startswith("{") or a == b for a, b in zip(t, segments)):
                literal = sum(1 for a in t if not a.startswith("{"))
                if best is None or literal > best[0]:
                    best = (literal, template)
        _templates[key] = best[1] if best else path
    return _templates[key]


if __name__ == "__main__":
    sys.exit(main())
