import Foundation
import JSON
@testable import LatchkeyServer
import Testing
import WebAuthn
import WebAuthnTesting

/// SPEC "Portability", provider names and icons: `providerIcon` in the passkey JSON and
/// `GET /v1/providers/{aaguid}/icon`, from the shipped community table and from MDS3.
@Suite struct ProviderIconTests {
    static let onePassword = "bada5566-a7aa-401f-bd96-45619a55120d"

    /// The shipped table's data: URL for an AAGUID and theme, decoded here independently of the server.
    static func shipped(_ aaguid: String, _ theme: String) throws -> [UInt8] {
        let file = try #require(FileManager.default.contents(atPath: "web/aaguids.json"))
        let root = try JSONParser.parse([UInt8](file), maxMembers: 1 << 16)
        let icon = try #require(root["icons"]?[aaguid])
        let url = try #require(icon[theme]?.stringValue ?? icon["light"]?.stringValue)
        let payload = try #require(url.split(separator: ",", maxSplits: 1).last)
        return [UInt8](try #require(Data(base64Encoded: String(payload))))
    }

    static func expectServedSafely(_ r: Reply, _ type: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(r.status == 200 && r.contentType == type, "\(r.status) \(r.contentType ?? "-")", sourceLocation: sourceLocation)
        #expect(r.header("Content-Security-Policy") == "sandbox", sourceLocation: sourceLocation)
        #expect(r.header("X-Content-Type-Options") == "nosniff", sourceLocation: sourceLocation)
        #expect(r.header("Cache-Control")?.hasPrefix("public, max-age=") == true, "\(r.header("Cache-Control") ?? "-")", sourceLocation: sourceLocation)
    }

    @Test("the shipped table's icons: light and dark served as SVG with the sandbox CSP and nosniff, any case of AAGUID")
    func shippedIcons() throws {
        let s = try TestServer(name: "icons")
        let c = s.client()
        let light = try c.get("/v1/providers/\(Self.onePassword)/icon?theme=light")
        Self.expectServedSafely(light, "image/svg+xml")
        #expect(light.body == (try Self.shipped(Self.onePassword, "light")))
        let dark = try c.get("/v1/providers/\(Self.onePassword.uppercased())/icon?theme=dark")
        Self.expectServedSafely(dark, "image/svg+xml")
        #expect(dark.body == (try Self.shipped(Self.onePassword, "dark")))
        // 1Password's list entry has a dark icon of its own.
        #expect(dark.body != light.body)
        // An entry without a dark icon serves its light one for both.
        let keeper = "0ea242b4-43c4-4a1b-8b17-dd6d0b6baec6"
        #expect(try c.get("/v1/providers/\(keeper)/icon?theme=dark").body == (try Self.shipped(keeper, "light")))
    }

    @Test("404 not_found: an unknown or all-zero AAGUID, a theme other than light or dark, a segment that is not an AAGUID")
    func refusals() throws {
        let s = try TestServer(name: "icons-404")
        let c = s.client()
        let paths = [
            "/v1/providers/00000000-0000-0000-0000-000000000000/icon?theme=light",
            "/v1/providers/0badc0de-0000-4000-8000-000000000001/icon?theme=dark",
            "/v1/providers/\(Self.onePassword)/icon?theme=blue",
            "/v1/providers/\(Self.onePassword)/icon?theme=LIGHT",
            "/v1/providers/\(Self.onePassword)/icon",
            "/v1/providers/bada5566a7aa401fbd9645619a55120d/icon?theme=light",
            "/v1/providers/not-an-aaguid/icon?theme=light",
            "/v1/providers/bada5566-a7aa-401f-bd96-45619a55120g/icon?theme=light",
            "/v1/providers/%00ada566-a7aa-401f-bd96-45619a55120d/icon?theme=light",
            "/v1/providers/\(String(repeating: "a", count: 5000))/icon?theme=light",
        ]
        for path in paths {
            let r = try c.get(path)
            #expect(r.status == 404 && r.isProblem && r.code == "not_found", "\(path.prefix(80)): \(r)")
            #expect(r.header("Content-Security-Policy") == nil || r.contentType?.hasPrefix("image/") != true)
        }
    }

    @Test("providerIcon: the two URLs for a provider the table has an icon for, null for one it has none for")
    func passkeyJSON() throws {
        let s = try TestServer(name: "icons-json")
        let c = s.client()
        let known = try c.signUp(SoftAuthenticator(aaguid: try #require(parseUUID(Self.onePassword))), username: s.username())
        let expected: JSONValue = .object([("light", .string("/v1/providers/\(Self.onePassword)/icon?theme=light")),
                                           ("dark", .string("/v1/providers/\(Self.onePassword)/icon?theme=dark"))])
        #expect(known.passkey["providerIcon"] == expected, "\(known.passkey)")
        let list = try c.get("/v1/passkeys", authorization: known.bearer)
        let listed = try #require(list.json?["passkeys"]?.arrayValue?.first)
        #expect(listed["providerIcon"] == expected && listed["provider"]?.stringValue == "1Password", "\(list)")
        // Each URL the passkey names is served.
        for theme in ["light", "dark"] {
            Self.expectServedSafely(try c.get(try #require(expected[theme]?.stringValue)), "image/svg+xml")
        }

        let unknown = try c.signUp(SoftAuthenticator(aaguid: [UInt8](repeating: 0x5a, count: 16)), username: s.username())
        #expect(unknown.passkey["providerIcon"] == .null, "\(unknown.passkey)")
        let unknownList = try c.get("/v1/passkeys", authorization: unknown.bearer)
        #expect(unknownList.json?["passkeys"]?.arrayValue?.first?["providerIcon"] == .null, "\(unknownList)")
    }

    @Test("ProviderIcon: only PNG (with its signature) and SVG data: URLs, base64, at most 64 KiB")
    func decoding() {
        let svg = "data:image/svg+xml;base64," + Data("<svg xmlns=\"http://www.w3.org/2000/svg\"/>".utf8).base64EncodedString()
        #expect(ProviderIcon(dataURL: svg)?.contentType == "image/svg+xml")
        let png = "data:image/png;base64," + Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13]).base64EncodedString()
        #expect(ProviderIcon(dataURL: png)?.contentType == "image/png")
        let refused = [
            "data:image/png;base64," + Data("GIF89a".utf8).base64EncodedString(),  // not a PNG
            "data:image/svg+xml;base64," + Data("<html><script>x</script></html>".utf8).base64EncodedString(),  // no <svg
            "data:text/html;base64," + Data("<svg/>".utf8).base64EncodedString(),
            "data:image/gif;base64,R0lGODlhAQABAAAAACw=",
            "data:image/svg+xml,<svg/>",  // not base64
            "data:image/svg+xml;base64,***",
            "data:image/svg+xml;base64,",
            "https://example.com/icon.svg",
            "",
            "data:image/svg+xml;base64," + Data(("<svg>" + String(repeating: " ", count: 65_536)).utf8).base64EncodedString(),
            "data:image/svg+xml;base64," + Data([0x3C, 0x73, 0x76, 0x67, 0xFF, 0xFE]).base64EncodedString(),  // not UTF-8
        ]
        for url in refused { #expect(ProviderIcon(dataURL: url) == nil, "\(url.prefix(60))") }
    }
}

/// MDS3: a metadata statement's `icon` is the passkey's icon for both themes; an SVG with a script
/// in it is served as it is, under `Content-Security-Policy: sandbox`.
@Suite(.serialized) struct ProviderIconMetadataTests {
    static let scripted = "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 1 1\"><script>alert(document.cookie)</script><rect width=\"1\" height=\"1\"/></svg>"

    @Test("a statement's SVG icon, script and all, is served sandboxed for both themes and named by the passkey")
    func metadataIcon() throws {
        var entry = MDSFiles.entry()
        entry.icon = "data:image/svg+xml;base64," + Data(Self.scripted.utf8).base64EncodedString()
        let dir = try MDSFiles.folder(entries: [entry])
        let s = try TestServer(name: "icons-mds", configure: MDSFiles.configure(dir))
        let c = s.client()
        let aaguid = formatUUID(MDSFiles.aaguid)
        let session = try c.signUp(SoftAuthenticator(aaguid: MDSFiles.aaguid), username: s.username(), format: .packedFull(MDSFiles.identity))
        #expect(session.passkey["providerIcon"]?["dark"]?.stringValue == "/v1/providers/\(aaguid)/icon?theme=dark", "\(session.passkey)")
        for theme in ["light", "dark"] {
            let r = try c.get("/v1/providers/\(aaguid)/icon?theme=\(theme)")
            ProviderIconTests.expectServedSafely(r, "image/svg+xml")
            #expect(r.text == Self.scripted)
        }
    }

    @Test("a statement icon that is not a PNG or SVG is no icon: providerIcon null, 404")
    func refusedMetadataIcon() throws {
        var entry = MDSFiles.entry()
        entry.icon = "data:text/html;base64," + Data("<svg onload=alert(1)>".utf8).base64EncodedString()
        let dir = try MDSFiles.folder(entries: [entry])
        let s = try TestServer(name: "icons-mds-bad", configure: MDSFiles.configure(dir))
        let c = s.client()
        let session = try c.signUp(SoftAuthenticator(aaguid: MDSFiles.aaguid), username: s.username(), format: .packedFull(MDSFiles.identity))
        #expect(session.passkey["providerIcon"] == .null, "\(session.passkey)")
        let r = try c.get("/v1/providers/\(formatUUID(MDSFiles.aaguid))/icon?theme=light")
        #expect(r.status == 404 && r.code == "not_found", "\(r)")
    }
}
