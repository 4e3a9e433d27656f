import Crypto
import JSON

// Shared types of device-key attestation: Android Key Attestation and Apple App Attest
// both produce an `AttestedDeviceKey` under one `DeviceKeyAttestationPolicy`. The declarations follow
// the contract in notes/device-key-attestation-api.md exactly; the App Attest branch compiles against it.

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
/// `{"entries": {"<serial hex, lower case>": {"status": "REVOKED"|"SUSPENDED", "reason": …}}}`.
/// Keys are hex even when they contain only digits ("8350192447815228107" is hex, not decimal).
/// Both REVOKED and SUSPENDED refuse a chain: a suspended key is not trusted until it is lifted.
public struct AttestationStatusList: Sendable {
    public let revokedSerials: Set<String>   // lower-case hex as in the list

    /// Refuses (invalid_request) anything but an object with an `entries` object whose keys are hex
    /// and whose values are objects with a string `status`. Unknown statuses are refused too: a list
    /// this code cannot read must not silently trust a certificate.
    public init(json: [UInt8]) throws(DeviceKeyError) {
        let root: JSONValue
        do { root = try JSONParser.parse(json) } catch { throw DeviceKeyError(.invalidRequest, "status list is not JSON: \(error.reason)") }
        guard root.objectValue != nil, let entries = root["entries"]?.objectValue else {
            throw DeviceKeyError(.invalidRequest, "status list has no \"entries\" object")
        }
        var revoked = Set<String>()
        for (key, value) in entries {
            let serial = key.lowercased()
            guard !serial.isEmpty, serial.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }) else {
                throw DeviceKeyError(.invalidRequest, "status list key is not a hex serial number")
            }
            guard let status = value["status"]?.stringValue else {
                throw DeviceKeyError(.invalidRequest, "status list entry \(serial) has no string \"status\"")
            }
            switch status {
            case "REVOKED", "SUSPENDED": revoked.insert(Self.normalised(serial))
            default: throw DeviceKeyError(.invalidRequest, "status list entry \(serial) has unknown status \"\(status)\"")
            }
        }
        revokedSerials = revoked
    }

    private init(serials: Set<String>) { revokedSerials = serials }
    public static let empty = AttestationStatusList(serials: [])

    /// Compares as numbers written in hex: case and leading zeros do not matter.
    public func isRevoked(serialHex: String) -> Bool { revokedSerials.contains(Self.normalised(serialHex.lowercased())) }

    static func normalised(_ hex: String) -> String {
        let trimmed = String(hex.drop(while: { $0 == "0" }))
        return trimmed.isEmpty ? "0" : trimmed
    }
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
    public static var shippedRoots: [Certificate] { ShippedRoots.certificates }
}

/// Parsed once; a shipped root that does not parse is a build defect, so it traps at first use
/// (the DeviceKeysTests suite parses every one).
enum ShippedRoots {
    static let pems: [(file: String, bytes: [UInt8])] = [
        ("google-hardware-attestation-root-1-rsa-2016.pem", PackageResources.google_hardware_attestation_root_1_rsa_2016_pem),
        ("google-hardware-attestation-root-2-rsa-2019.pem", PackageResources.google_hardware_attestation_root_2_rsa_2019_pem),
        ("google-hardware-attestation-root-3-rsa-2021.pem", PackageResources.google_hardware_attestation_root_3_rsa_2021_pem),
        ("google-hardware-attestation-root-4-rsa-2022.pem", PackageResources.google_hardware_attestation_root_4_rsa_2022_pem),
        ("google-key-attestation-ca1-ec-p384-2025.pem", PackageResources.google_key_attestation_ca1_ec_p384_2025_pem),
        ("apple-app-attestation-root-ca.pem", PackageResources.apple_app_attestation_root_ca_pem),
    ]
    static let certificates: [Certificate] = pems.flatMap { pem in
        do { return try Certificate.parsePEM(String(decoding: pem.bytes, as: UTF8.self)) } catch {
            fatalError("shipped root \(pem.file) does not parse: \(error)")
        }
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

    public init(format: AttestationFormatName, securityLevel: KeySecurityLevel, app: String?, userAuthenticationRequired: Bool?,
                publicKey: DevicePublicKey, appAttestKeyId: [UInt8]?, counter: UInt32?, decoded: JSONValue) {
        self.format = format
        self.securityLevel = securityLevel
        self.app = app
        self.userAuthenticationRequired = userAuthenticationRequired
        self.publicKey = publicKey
        self.appAttestKeyId = appAttestKeyId
        self.counter = counter
        self.decoded = decoded
    }
}

/// Optional collector of every check (name, ok, detail) for inspect; nil on the server hot path.
/// One trace belongs to one verification call at a time (hence `@unchecked Sendable`, not a lock).
public final class AttestationTrace: @unchecked Sendable {
    public init() {}
    public private(set) var checks: [(check: String, ok: Bool, detail: String?)] = []
    public var decoded: [(key: String, value: JSONValue)] = []
    public func record(_ check: String, _ ok: Bool, _ detail: String? = nil) { checks.append((check: check, ok: ok, detail: detail)) }
    public var json: JSONValue {   // {"checks":[{"check","ok","detail"?}], "decoded": {...}}
        .object([
            ("checks", .array(checks.map { c in
                var m: [(key: String, value: JSONValue)] = [("check", .string(c.check)), ("ok", .bool(c.ok))]
                if let d = c.detail { m.append(("detail", .string(d))) }
                return .object(m)
            })),
            ("decoded", .object(decoded)),
        ])
    }
}
