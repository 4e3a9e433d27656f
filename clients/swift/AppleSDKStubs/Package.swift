// swift-tools-version:6.0
import PackageDescription

// A Linux type-check of LatchkeyClient's Apple-only code (Sources/LatchkeyClient/Apple) and of the
// Swift snippets in docs/integration/ios.md, against hand-written stubs of the few SDK declarations
// they use (AuthenticationServices, CryptoKit, DeviceCheck, LocalAuthentication, Security). It catches
// typos, typed-throws and Swift 6 concurrency mistakes in our code, and snippets that drifted from the
// package's API; it cannot prove the stubs match Apple's SDK — only a build in Xcode does that.
// check.sh generates Sources/AppleCode (the client's sources, Apple files unguarded, plus the
// snippets) and builds it, once with the delegate protocols main-actor isolated as recent SDKs
// declare them, once without.
let strict: [SwiftSetting] = [.enableUpcomingFeature("ExistentialAny"), .enableUpcomingFeature("MemberImportVisibility")]

let package = Package(
    name: "AppleSDKStubs",
    targets: [
        .target(name: "Security"),
        .target(name: "LocalAuthentication"),
        .target(name: "CryptoKit", dependencies: ["Security", "LocalAuthentication"]),
        .target(name: "DeviceCheck"),
        .target(name: "AuthenticationServices", dependencies: ["CryptoKit"]),
        .target(name: "AppleCode", dependencies: ["AuthenticationServices", "CryptoKit", "DeviceCheck", "LocalAuthentication", "Security"],
                swiftSettings: strict),
    ]
)
