#!/usr/bin/env bash
# Type-checks LatchkeyClient's Apple-only files and docs/integration/ios.md's Swift snippets on Linux
# against the SDK stubs here (see Package.swift for what this does and does not prove).
set -euo pipefail
if [[ "$(uname)" == Darwin ]]; then echo "on macOS the real SDK is there: build LatchkeyClient in Xcode instead"; exit 0; fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
client="$here/../LatchkeyClient/Sources/LatchkeyClient"
out="$here/Sources/AppleCode"
rm -rf "$out" && mkdir -p "$out"
for f in "$client"/*.swift "$client"/JSON/*.swift; do cp "$f" "$out/"; done
# The Apple files without their platform guards (canImport stays: the stubs provide the modules).
for f in "$client"/Apple/*.swift; do
  sed -e 's/^#if canImport(\(.*\)) && (os(iOS) || os(macOS) || os(visionOS))$/#if canImport(\1)/' \
      -e 's/^    #if os(iOS) || os(visionOS)$/    #if true/' "$f" > "$out/$(basename "$f")"
done
python3 - "$here/../../../docs/integration/ios.md" "$out/DocSnippets.swift" <<'PY'
import re, sys
md = open(sys.argv[1]).read()
blocks = re.findall(r'```swift\n(.*?)```', md, re.S)
code = ['import Foundation', 'import AuthenticationServices', '']
# A block that declares things (func/struct/let at top level) is taken as it is; a fragment is
# wrapped in a function whose parameters are the names it uses from the surrounding prose.
fragments = {
    'let request = options.platformRequest()': 'options: RegistrationOptions, authorization: ASAuthorization',
    'let autofill = PasskeyAuthorization': 'window: UIWindow',
    'let token = try await latchkey.stepUpWithPasskey': 'id: String, access: String, authorization: PasskeyAuthorization',
    'do {\n    _ = try await latchkey.stepUp': 'action: StepUpAction, keyId: String, key: SecureEnclaveDeviceKey, access: String',
}
for i, b in enumerate(blocks):
    b = b.replace('import LatchkeyClient\n', '')
    params = next((p for start, p in fragments.items() if b.startswith(start)), None)
    if params is None:
        code.append(b)
    else:
        code.append(f'@MainActor\nfunc snippet{i}({params}) async throws {{\n{b}}}\n')
open(sys.argv[2], 'w').write('\n'.join(code))
PY
cd "$here"
for variant in main-actor nonisolated; do
  if [[ $variant == nonisolated ]]; then extra=(-Xswiftc -DNONISOLATED_DELEGATES); else extra=(); fi
  echo "Apple code type-check ($variant delegates)"
  swift build "${extra[@]}" 2>&1 | grep -E "error:|AppleCode/.*warning: .*(Sendable|isolat|actor)" && exit 1 || true
  swift build "${extra[@]}" >/dev/null
done
echo "Apple code type-check: ok"
