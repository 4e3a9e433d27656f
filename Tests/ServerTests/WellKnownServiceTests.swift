import Crypto
import Foundation
import JSON
@testable import LatchkeyServer
@testable import Storage
import Synchronization
import Testing

/// The association files (`/.well-known/…`) and the console's preview, built by `WellKnownService`
/// from the in-memory app store (`AdminWorld`): no socket, no PostgreSQL. WellKnownTests and
/// AppsTests serve them over HTTP and PostgreSQL.
@Suite("Well-known service, in memory")
struct WellKnownServiceTests {
    @Test("the files follow the declared apps and the allowlist, rebuilt at once on this instance's change and within a second otherwise")
    func builtFiles() throws {
        let w = AdminWorld()
        #expect(String(decoding: try w.wellKnown.file("assetlinks.json"), as: UTF8.self) == "[]\n")
        w.tables.rows.withLock { $0.origins["https://shop.example.net"] = "admin" }
        _ = try w.admin.putApp(w.androidApp(), by: .adminKey)
        let links = String(decoding: try w.wellKnown.file("assetlinks.json"), as: UTF8.self)
        #expect(links.contains("com.example.app") && links.contains(AdminWorld.fingerprint))
        // Related origins: the allowlist's https origins outside the rpId (an app's origin is none).
        let webauthn = try JSONParser.parse(try w.wellKnown.file("webauthn"))
        #expect(webauthn["origins"] == .array(["https://shop.example.net"]))

        // A change another instance made (straight in the store): served once the cache is a second old.
        w.tables.rows.withLock { $0.apps.removeAll() }
        #expect(String(decoding: try w.wellKnown.file("assetlinks.json"), as: UTF8.self).contains("com.example.app"))
        w.clock.advance(1.5)
        #expect(String(decoding: try w.wellKnown.file("assetlinks.json"), as: UTF8.self) == "[]\n")
        expectRefusal(.notFound) { try w.wellKnown.file("security.txt") }
    }

    @Test("the preview shows the files and allowlist a declaration would give, replacing the app with its id, and writes nothing")
    func preview() throws {
        let w = AdminWorld()
        _ = try w.admin.addOrigin(.object([("origin", "https://login.admin.test")]), by: .adminKey)
        _ = try w.admin.putApp(w.androidApp(), by: .adminKey)
        let before = w.tables.snapshot
        let other = Array(repeating: "CD", count: 32).joined(separator: ":")
        let candidate = try AppDeclarations.parse(w.androidApp(fingerprints: [other]))
        let preview = AppRenderer.preview(try w.wellKnown.preview(candidate: candidate))
        let origins = try #require(preview["origins"]?.arrayValue).compactMap(\.stringValue)
        // The replaced fingerprint's origin (synced from the app) is gone; the hand-added one stays.
        #expect(origins == ["android:apk-key-hash:" + Base64URL.encode([UInt8](repeating: 0xCD, count: 32)), "https://login.admin.test"])
        let files = try #require(preview["files"]?.arrayValue)
        #expect(files.map { $0["name"]?.stringValue } == WellKnownService.names.map { Optional($0) })
        #expect(files.allSatisfy { $0["source"]?.stringValue == "built" && $0["built"] == .null })
        #expect(preview["rpId"]?.stringValue == AdminWorld.rpId)
        #expect(preview["ok"] == .bool(preview["problems"]?.arrayValue?.isEmpty == true))
        let after = w.tables.snapshot
        #expect(after.apps == before.apps && after.origins == before.origins && after.audit.count == before.audit.count)
    }

    @Test("an iOS app's preview names the app in the Apple file; a storage failure fails the files with 503 internal_error")
    func iosAndFailure() throws {
        let w = AdminWorld()
        let value = try w.wellKnown.preview(candidate: try AppDeclarations.parse(.object([("platform", "ios"), ("appId", .string(AdminWorld.teamApp))])))
        #expect(value.ok && value.origins == ["https://admin.test"])
        let preview = AppRenderer.preview(value)
        let apple = try #require(preview["files"]?.arrayValue?.first { $0["name"]?.stringValue == "apple-app-site-association" })
        #expect(apple["content"]?.stringValue?.contains(AdminWorld.teamApp) == true)
        #expect(preview["origins"] == .array(["https://admin.test"]))
        w.tables.down.withLock { $0 = true }
        expectRefusal(.internalError) { try w.wellKnown.file("assetlinks.json") }
        expectRefusal(.internalError) { try w.wellKnown.preview(candidate: nil) }
    }
}
