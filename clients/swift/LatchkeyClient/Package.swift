// swift-tools-version:6.0
import Foundation
import PackageDescription

// LatchkeyClient: what an iOS or macOS app needs to talk to a Latchkey server — the passkey
// ceremonies and step-up over HTTP, the bridging between AuthenticationServices' results and the
// W3C JSON shapes, a Secure Enclave device key and App Attest, and the action hash (RFC 8785)
// exactly as the server computes it. No package dependencies: an app adds this folder and nothing else.
//
// The tests drive a real `latchkey serve` on Linux and sign with the server package's own
// OpenSSL-backed soft authenticator. That dependency (the repository root, by path) is added only
// where the tests run against a server: on Linux, or anywhere with LATCHKEY_CLIENT_SERVER_TESTS=1.
// An app on iOS or macOS resolves no dependency at all.

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

#if os(Linux)
let serverTests = true
#else
let serverTests = ProcessInfo.processInfo.environment["LATCHKEY_CLIENT_SERVER_TESTS"] == "1"
#endif

let package = Package(
    name: "LatchkeyClient",
    // The server package needs macOS 15; an app using only the client does not.
    platforms: [.iOS(.v16), serverTests ? .macOS(.v15) : .macOS(.v13), .tvOS(.v16), .visionOS(.v1)],
    products: [
        .library(name: "LatchkeyClient", targets: ["LatchkeyClient"]),
    ],
    dependencies: serverTests ? [.package(name: "Latchkey", path: "../../..")] : [],
    targets: [
        .target(name: "LatchkeyClient", swiftSettings: strict),
        .testTarget(
            name: "LatchkeyClientTests",
            dependencies: ["LatchkeyClient"] + (serverTests ? [.product(name: "LatchkeyTestSupport", package: "Latchkey")] : []),
            swiftSettings: strict),
    ]
)
