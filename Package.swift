// swift-tools-version:6.1
import PackageDescription

// Latchkey: a passkey (WebAuthn) relying-party server.
// Layers, bottom-up: C system libraries → one thin Swift wrapper each (CBOR, Crypto, PostgreSQL,
// HTTP) → pure protocol core (WebAuthn, DeviceKeys, Tokens, WellKnown) → server → `latchkey`.

let language: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]
// scripts/fuzz.sh builds with LATCHKEY_FUZZ_BUILD=1: every module of the program gets libFuzzer's
// coverage and AddressSanitizer, but not the build-time tool (EmbedText), which `-Xswiftc` would
// reach too and which cannot link with libFuzzer.
let fuzzing = Context.environment["LATCHKEY_FUZZ_BUILD"] == "1"
let strict: [SwiftSetting] = language + (fuzzing ? [.unsafeFlags(["-sanitize=fuzzer,address"]), .define("FUZZING")] : [])
// Wrapper targets keep their C module internal: a C type leaking into a public API fails to compile.
let wrapper: [SwiftSetting] = strict + [.enableUpcomingFeature("InternalImportsByDefault")]

let package = Package(
    name: "Latchkey",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "latchkey", targets: ["latchkey"]),
        .library(name: "WebAuthn", targets: ["WebAuthn"]),
        // For clients/swift/LatchkeyClient's Linux tests only (a local path dependency): the soft
        // authenticator and App Attest builder sign for them, and DeviceKeys computes the action hash
        // the server computes. Not an API for apps.
        .library(name: "LatchkeyTestSupport", targets: ["WebAuthnTesting", "DeviceKeysTesting", "DeviceKeys", "WebAuthn", "Crypto", "JSON", "CBOR"]),
    ],
    targets: [
        // C libraries from Debian's -dev packages.
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CCBOR", pkgConfig: "libcbor", providers: [.apt(["libcbor-dev"])]),
        .systemLibrary(name: "CLibPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        .systemLibrary(name: "CMicroHTTPD", pkgConfig: "libmicrohttpd", providers: [.apt(["libmicrohttpd-dev"])]),
        // Outgoing HTTPS (webhook deliveries, `latchkey mds fetch`): libcurl over the same OpenSSL, for
        // certificate verification and timeouts we do not have to write ourselves.
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),

        // One thin Swift layer per C library.
        .target(name: "CBOR", dependencies: ["CCBOR"], swiftSettings: wrapper),
        .target(name: "Crypto", dependencies: ["COpenSSL"], swiftSettings: wrapper),
        .target(name: "PostgreSQL", dependencies: ["CLibPQ", "EventLoop"], swiftSettings: wrapper),
        .target(name: "HTTP", dependencies: ["CMicroHTTPD", "EventLoop"], swiftSettings: wrapper),
        // One thread per core on an epoll set, the executor of the tasks that serve requests.
        .systemLibrary(name: "CEpoll"),
        .target(name: "EventLoop", dependencies: ["CEpoll"], swiftSettings: wrapper),
        .target(name: "Curl", dependencies: ["CCurl"], swiftSettings: wrapper),

        // Pure Swift.
        .target(name: "JSON", swiftSettings: strict),
        // What the two protocol cores share: one error shape with SPEC's codes (WebAuthnError and
        // DeviceKeyError name it), re-exported by both, and the one ceremony-state codec. No HTTP, no SQL.
        .target(name: "ProtocolCore", dependencies: ["Crypto", "JSON"], swiftSettings: strict),
        .target(name: "WebAuthn", dependencies: ["ProtocolCore", "CBOR", "Crypto", "JSON"], swiftSettings: strict),

        .target(name: "WellKnown", dependencies: ["JSON", "Crypto"], swiftSettings: strict),
        // The shipped attestation roots are the PEM files in DeviceKeys/Roots, compiled in like Storage's migrations.
        .target(name: "DeviceKeys", dependencies: ["ProtocolCore", "CBOR", "Crypto", "JSON"], exclude: ["Roots/README.md"], resources: [.embedInCode("Roots")],
                swiftSettings: strict),
        // Receipts a third party verifies (SPEC "Evidence"): the document a step-up writes and its offline
        // checker, shared by the server and `latchkey receipts verify`. Pure: no I/O, no clock.
        .target(name: "Receipts", dependencies: ["DeviceKeys", "WebAuthn", "Crypto", "JSON"], swiftSettings: strict),
        // Migrations are the .sql files in Storage/Migrations, compiled in (no resource bundle at run time).
        .target(name: "Storage", dependencies: ["PostgreSQL", "EventLoop", "JSON"], resources: [.embedInCode("Migrations")], swiftSettings: strict),
        // The OpenAPI document of the HTTP surface (OpenAPI/openapi.json), compiled in as one string
        // literal by the EmbedTextPlugin and served at /openapi.json.
        .target(name: "LatchkeyServer", dependencies: ["WebAuthn", "WellKnown", "DeviceKeys", "Receipts", "Storage", "HTTP", "EventLoop", "Curl", "Tokens",
                                                       "Crypto", "JSON", "Transparency"],
                exclude: ["OpenAPI/openapi.json"], swiftSettings: strict, plugins: ["EmbedTextPlugin"]),
        // A text file as a raw string literal, for files too large for `.embedInCode`'s byte array
        // (a build-time tool and the build-tool plugin that runs it).
        .executableTarget(name: "EmbedText", swiftSettings: language),
        .plugin(name: "EmbedTextPlugin", capability: .buildTool(), dependencies: ["EmbedText"], path: "Sources/EmbedTextPlugin"),
        .target(name: "Tokens", dependencies: ["Crypto", "JSON"], swiftSettings: strict),
        // C2SP transparency log pieces (RFC 9162 hashing, signed notes, checkpoints, cosignatures,
        // tiles, tlog-proof): pure, no HTTP and no SQL.
        .target(name: "Transparency", dependencies: ["Crypto"], swiftSettings: strict),

        // The PostgreSQL the integration test targets share (DATABASE_URL, else the throwaway test cluster).
        .target(name: "PostgreSQLTesting", swiftSettings: strict),
        // App Attest objects and assertions under a test root: fixtures for DeviceKeys and server tests.
        .target(name: "DeviceKeysTesting", dependencies: ["DeviceKeys", "CBOR", "Crypto"], swiftSettings: strict),
        // A software authenticator: fixtures for tests, load for `latchkey bench`.
        .target(name: "WebAuthnTesting", dependencies: ["WebAuthn", "CBOR", "Crypto", "JSON"], swiftSettings: strict),

        .executableTarget(name: "latchkey", dependencies: ["LatchkeyServer", "WebAuthn", "WebAuthnTesting", "Storage", "PostgreSQL",
                                                        "HTTP", "EventLoop", "CBOR", "Crypto", "JSON", "WellKnown", "DeviceKeys", "Receipts", "Curl", "Transparency", "Tokens"],
                          swiftSettings: strict),

        // libFuzzer harness, one executable for every fuzz target (LATCHKEY_FUZZ_TARGET picks one).
        // scripts/fuzz.sh builds it alone with `-sanitize=fuzzer,address -DFUZZING` (LATCHKEY_FUZZ_BUILD; its main hands
        // argv to LLVMFuzzerRunDriver); the normal build compiles it as a replay tool
        // (`latchkey-fuzz TARGET FILE…`), so an API change that breaks a target breaks `swift build`.
        .systemLibrary(name: "CLibFuzzer", path: "Tests/Fuzz/CLibFuzzer"),
        .executableTarget(name: "latchkey-fuzz", dependencies: ["CLibFuzzer", "LatchkeyServer", "WebAuthn", "DeviceKeys", "Tokens",
                                                             "HTTP", "Storage", "CBOR", "Crypto", "JSON"],
                          path: "Tests/Fuzz/Harness", swiftSettings: strict,
                          linkerSettings: fuzzing ? [.unsafeFlags(["-sanitize=fuzzer,address"])] : []),

        .testTarget(name: "CBORTests", dependencies: ["CBOR"], swiftSettings: strict),
        .testTarget(name: "CryptoTests", dependencies: ["Crypto"], swiftSettings: strict),
        .testTarget(name: "PostgreSQLTests", dependencies: ["PostgreSQLTesting", "PostgreSQL", "EventLoop"], swiftSettings: strict),
        .testTarget(name: "HTTPTests", dependencies: ["HTTP", "EventLoop", "Curl"], swiftSettings: strict),
        .testTarget(name: "TokensTests", dependencies: ["Tokens", "Crypto", "JSON", "WebAuthn"], swiftSettings: strict),
        .testTarget(name: "WellKnownTests", dependencies: ["WellKnown", "JSON", "Crypto", "WebAuthn"], swiftSettings: strict),
        .testTarget(name: "DeviceKeysTests", dependencies: ["DeviceKeys", "DeviceKeysTesting", "CBOR", "JSON", "Crypto", "WebAuthn",
                                                        "WebAuthnTesting"],
                    exclude: ["Fixtures"], swiftSettings: strict),
        .testTarget(name: "ReceiptsTests", dependencies: ["Receipts", "DeviceKeys", "DeviceKeysTesting", "WebAuthn", "WebAuthnTesting",
                                                      "CBOR", "Crypto", "JSON"], swiftSettings: strict),
        // Integration: real PostgreSQL (DATABASE_URL, or the dev cluster) over real HTTP on loopback.
        .testTarget(name: "ServerTests", dependencies: ["PostgreSQLTesting", "LatchkeyServer", "WebAuthnTesting", "WebAuthn", "Storage", "PostgreSQL",
                                                       "HTTP", "Tokens", "Crypto", "JSON", "DeviceKeys", "DeviceKeysTesting", "Receipts", "WellKnown", "Curl", "Transparency"],
                    swiftSettings: strict),
        // Integration: the repositories on real PostgreSQL (DATABASE_URL, or the throwaway test cluster).
        .testTarget(name: "StorageTests", dependencies: ["PostgreSQLTesting", "Storage", "PostgreSQL", "JSON"], swiftSettings: strict),
        .testTarget(name: "TransparencyTests", dependencies: ["Transparency", "Crypto"], swiftSettings: strict),
        .testTarget(name: "JSONTests", dependencies: ["JSON"], swiftSettings: strict),
        .testTarget(name: "WebAuthnTests", dependencies: ["WebAuthn", "WebAuthnTesting", "CBOR", "Crypto", "JSON"],
                    exclude: ["Fixtures"], swiftSettings: strict),
    ]
)
