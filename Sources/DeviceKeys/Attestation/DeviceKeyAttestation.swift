import Crypto
import JSON

// Shared device-key attestation types (contract: notes/device-key-attestation-api.md). Both the
// Android Key Attestation and the App Attest verifiers use these; keep to exactly these declarations.

public enum AttestationFormatName: String, Sendable { case androidKey = "android-key", appleAppAttest = "apple-appattest", none }
public enum KeySecurityLevel: String, Sendable { case strongBox = "strongbox", tee, secureEnclave = "secure-enclave", software, unknown }

/// A declared Android app: package name + SHA-256 digests of its signing certificates (from the apps list).
public struct AndroidAppIdentity: Sendable, Hashable {
    public let packageName: String
    public let signatureDigests: [[UInt8]]
    public init(packageName: String, signatureDigests: [[UInt8]]) {
        self.packageName = packageName
        self.signatureDigests = signatureDigests
    }
}

/// Google's attestation status list (https://android.googleapis.com/attestation/status shape):
/// {"entries": {"<serial hex, lower case>": {"status": "REVOKED"|"SUSPENDED", "reason": …}}}
public struct AttestationStatusList: Sendable {
    public let revokedSerials: Set<String>   // lower-case hex as in the list

    /// invalid_request on a malformed list. Every entry counts, SUSPENDED as well as REVOKED.
    public init(json: [UInt8]) throws(DeviceKeyError) {
        let root: JSONValue
        do { root = try JSONParser.parse(json) } catch { throw DeviceKeyError(.invalidRequest, "status list is not JSON") }
        guard let entries = root["entries"]?.objectValue else {
            throw DeviceKeyError(.invalidRequest, "status list has no \"entries\" object")
        }
        var serials: Set<String> = []
        for entry in entries {
            guard entry.value["status"]?.stringValue != nil else {
                throw DeviceKeyError(.invalidRequest, "status list entry has no \"status\"")
            }
            serials.insert(entry.key.lowercased())
        }
        revokedSerials = serials
    }

    private init(serials: Set<String>) { revokedSerials = serials }

    public static let empty = AttestationStatusList(serials: [])

    public func isRevoked(serialHex: String) -> Bool { revokedSerials.contains(serialHex.lowercased()) }
}

public struct DeviceKeyAttestationPolicy: Sendable {
    public var trustAnchors: [Certificate]            // Google hardware roots + Apple App Attestation root by default
    public var statusList: AttestationStatusList = .empty
    public var androidApps: [AndroidAppIdentity] = []
    public var iosApps: [String] = []                 // "TEAMID.bundle.id"
    public var requireVerifiedBoot = false            // LATCHKEY_DEVICE_KEY_REQUIRE_VERIFIED_BOOT
    public var appAttestDevelopment = false           // LATCHKEY_APP_ATTEST_DEVELOPMENT
    public var now: Int64                              // unix seconds: validity is checked at this time

    public init(trustAnchors: [Certificate], now: Int64) {
        self.trustAnchors = trustAnchors
        self.now = now
    }

    /// The roots shipped in the repository (Sources/DeviceKeys/Roots/*.pem, embedded with SwiftPM
    /// `.embedInCode`, each with source + SHA-256 in Sources/DeviceKeys/Roots/README.md): Google hardware
    /// attestation roots (RSA 2016/2019/2021/2022 + EC "Key Attestation CA1") and the Apple App Attestation Root CA.
    /// NEVER the Android software attestation roots.
    public static var shippedRoots: [Certificate] {
        let pems = [PackageResources.apple_app_attestation_root_ca_pem]
        return pems.flatMap { (try? Certificate.parsePEM(String(decoding: $0, as: UTF8.self))) ?? [] }
    }
}

/// What an attestation proved about a device key.
public struct AttestedDeviceKey: Sendable {
    public let format: AttestationFormatName
    public let securityLevel: KeySecurityLevel
    public let app: String?                     // the declared app it is bound to: package name, or TEAMID.bundle.id
    public let userAuthenticationRequired: Bool?   // Android: not noAuthRequired (and the auth type/timeout, in `decoded`)
    public let publicKey: DevicePublicKey
    public let appAttestKeyId: [UInt8]?         // App Attest: SHA-256 of the public key (the credential id)
    public let counter: UInt32?                 // App Attest: the attestation's counter (0)
    public let decoded: JSONValue               // every decoded field, for `latchkey inspect device-key` and the stored record
}

/// Optional collector of every check (name, ok, detail) for inspect; nil on the server hot path.
public final class AttestationTrace: @unchecked Sendable {
    public init() {}
    public private(set) var checks: [(check: String, ok: Bool, detail: String?)] = []
    public var decoded: [(key: String, value: JSONValue)] = []

    public func record(_ check: String, _ ok: Bool, _ detail: String? = nil) { checks.append((check, ok, detail)) }

    public var json: JSONValue {   // {"checks":[{"check","ok","detail"?}], "decoded": {...}}
        let list: [JSONValue] = checks.map { c in
            var members: [(key: String, value: JSONValue)] = [("check", .string(c.check)), ("ok", .bool(c.ok))]
            if let detail = c.detail { members.append(("detail", .string(detail))) }
            return .object(members)
        }
        return .object([("checks", .array(list)), ("decoded", .object(decoded))])
    }
}
