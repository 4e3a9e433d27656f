#!/usr/bin/env bash
# The Python tools of the OpenAPI checks (PyPI), in a venv under data/, installed only when missing:
# openapi-core (scripts/openapi/validate-traffic.py), Schemathesis (schemathesis.sh) and cryptography
# (the software passkey of its hooks). Prints the venv's path.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="$REPO/data/openapi-venv"
if ! "$VENV/bin/python" -c 'import openapi_core, schemathesis, cryptography' 2>/dev/null; then
  eval "$(bash "$REPO/scripts/install-deps.sh" python3-venv)" >&2
  printf 'openapi: installing openapi-core, schemathesis and cryptography into %s\n' "$VENV" >&2
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check 'openapi-core>=0.19,<0.24' 'schemathesis>=4.0,<5' 'cryptography>=42' >&2
fi
printf '%s\n' "$VENV"
