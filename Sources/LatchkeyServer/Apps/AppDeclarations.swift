import Foundation
import JSON
import Storage
import WellKnown

/// Associated native apps: the admin's declaration (API body, or what the CLI assembled from flags)
/// ↔ the typed `AssociatedApp` ↔ the stored `AppRecord` (`AppRenderer` gives the API's JSON). The one declaration the
/// origin allowlist and the three well-known files follow from.
public enum AppDeclarations {
    /// iOS: `{"platform":"ios","teamId","bundleId"}` or `{"platform":"ios","appId":"TEAMID.bundle.id"}`;
    /// Android: `{"platform":"android","packageName","fingerprints":[…],"handleAllUrls"?}`.
    public static func parse(_ body: JSONValue) throws(ServiceError) -> AssociatedApp {
        do {
            switch body["platform"]?.stringValue {
            case "ios":
                if let appId = try RequestFields.optionalString(body, "appId") { return .ios(try IOSApp(appID: appId)) }
                guard let team = body["teamId"]?.stringValue, let bundle = body["bundleId"]?.stringValue else {
                    throw ServiceError.invalid("an iOS app needs teamId and bundleId (or appId TEAMID.bundle.id)")
                }
                return .ios(try IOSApp(teamId: team, bundleId: bundle))
            case "android":
                guard let package = body["packageName"]?.stringValue else { throw ServiceError.invalid("an Android app needs packageName") }
                guard let list = body["fingerprints"]?.arrayValue else {
                    throw ServiceError.invalid("an Android app needs fingerprints: [\(SigningCertificateFingerprint.expectedForm)]")
                }
                var fps: [SigningCertificateFingerprint] = []
                for value in list {
                    guard let s = value.stringValue else { throw ServiceError.invalid("fingerprints are strings: \(SigningCertificateFingerprint.expectedForm)") }
                    fps.append(try SigningCertificateFingerprint(parsing: s))
                }
                // Absent or null: false; anything but a JSON boolean is refused, not read as false.
                let handleAll: Bool
                switch body["handleAllUrls"] {
                case nil, .null?: handleAll = false
                case .bool(let value)?: handleAll = value
                default: throw ServiceError.invalid("handleAllUrls must be true or false")
                }
                return .android(try AndroidApp(packageName: package, fingerprints: fps, handleAllURLs: handleAll))
            default:
                throw ServiceError.invalid("platform must be ios or android")
            }
        } catch let e as WellKnownError {
            throw ServiceError.invalid(e.reason)
        } catch let e as ServiceError {
            throw e
        } catch {
            throw ServiceError.invalid("invalid app declaration")
        }
    }

    public static func record(_ app: AssociatedApp, rpId: String) -> AppRecord {
        switch app {
        case .ios(let a): AppRecord(rpId: rpId, platform: "ios", appId: a.appID)
        case .android(let a): AppRecord(rpId: rpId, platform: "android", appId: a.packageName,
                                        fingerprints: a.fingerprints.map(\.base64url), handleAllURLs: a.handleAllURLs)
        }
    }

    /// A stored row back into a typed app; rows that no longer validate are skipped (and reported
    /// by the checker as missing entries) rather than served.
    public static func app(_ r: AppRecord) -> AssociatedApp? {
        switch r.platform {
        case "ios": return (try? IOSApp(appID: r.appId)).map { .ios($0) }
        case "android":
            var fps: [SigningCertificateFingerprint] = []
            for f in r.fingerprints { guard let fp = try? SigningCertificateFingerprint(parsing: f) else { return nil }; fps.append(fp) }
            return (try? AndroidApp(packageName: r.appId, fingerprints: fps, handleAllURLs: r.handleAllURLs)).map { .android($0) }
        default: return nil
        }
    }

    /// `ios:TEAMID.bundle.id` / `android:package` → (platform, appId).
    public static func parseIdentifier(_ id: String) -> (platform: String, appId: String)? {
        guard let colon = id.firstIndex(of: ":") else { return nil }
        let platform = String(id[..<colon]), appId = String(id[id.index(after: colon)...])
        // TEAMID.bundle.id or a package name: ASCII letters, digits, ".", "_", "-" only.
        guard ["ios", "android"].contains(platform), !appId.isEmpty, appId.utf8.count <= 255,
              appId.utf8.allSatisfy({ b in (0x30...0x39).contains(b) || (0x41...0x5A).contains(b) || (0x61...0x7A).contains(b)
                  || b == UInt8(ascii: ".") || b == UInt8(ascii: "_") || b == UInt8(ascii: "-") }) else { return nil }
        return (platform, appId)
    }

    /// Every app of `rpId` that still validates.
    public static func apps(_ rows: [AppRecord]) -> [AssociatedApp] { rows.compactMap(app) }
}

/// A declared app of `rpId` as the admin API shows it; `createdAt` once it is read back from storage.
public struct DeclaredApp: Sendable {
    public let app: AssociatedApp
    public let rpId: String
    public let createdAt: Date?
}
