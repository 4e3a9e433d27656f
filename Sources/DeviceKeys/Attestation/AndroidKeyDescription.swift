import Crypto
import JSON

/// The Android Key Attestation extension (OID 1.3.6.1.4.1.11129.2.1.17) of a Keystore-generated
/// certificate, parsed in full and strictly, before any field is trusted. This is the *parse* step:
/// nothing here says the values are true; `AndroidKeyAttestationVerifier` decides that from the chain.
///
/// Schema (Android "Key and ID attestation", attestation versions 1–4 = Keymaster 2–4.1,
/// 100/200/300/400 = KeyMint 1–4, and later versions as they stay compatible):
///
///     KeyDescription ::= SEQUENCE {
///         attestationVersion         INTEGER,
///         attestationSecurityLevel   SecurityLevel,       -- ENUMERATED { Software(0), TrustedEnvironment(1), StrongBox(2) }
///         keyMintVersion             INTEGER,             -- keymasterVersion before KeyMint
///         keyMintSecurityLevel       SecurityLevel,
///         attestationChallenge       OCTET STRING,
///         uniqueId                   OCTET STRING,
///         softwareEnforced           AuthorizationList,
///         hardwareEnforced           AuthorizationList }  -- "teeEnforced" before KeyMint
///
/// Every member of an AuthorizationList is optional and `[tag] EXPLICIT <type>`. Strictness:
/// the eight members and their types are required; each known tag must hold exactly its type; tags
/// must be in ascending order (DER orders a SEQUENCE's optional members by definition order, which is
/// ascending tag order; android/keyattestation rejects `tags_not_in_ascending_order`), so none
/// repeats. A tag this parser does not know (a future KeyMint's) is kept by number, not interpreted.
public struct AndroidKeyDescription: Sendable {
    public static let oid = "1.3.6.1.4.1.11129.2.1.17"

    public enum SecurityLevel: Int, Sendable, CustomStringConvertible {
        case software = 0, trustedEnvironment = 1, strongBox = 2
        public var description: String {
            switch self { case .software: "Software"; case .trustedEnvironment: "TrustedEnvironment"; case .strongBox: "StrongBox" }
        }
    }

    public let attestationVersion: Int
    public let attestationSecurityLevel: SecurityLevel
    public let keyMintVersion: Int
    public let keyMintSecurityLevel: SecurityLevel
    public let attestationChallenge: [UInt8]
    public let uniqueId: [UInt8]
    public let softwareEnforced: AuthorizationList
    public let hardwareEnforced: AuthorizationList

    /// The challenge is at most 128 bytes (KeyMint refuses longer ones: `INVALID_INPUT_LENGTH`).
    public static let maxChallengeLength = 128

    /// Parses the extension's value (the DER inside extnValue's OCTET STRING).
    public init(der: [UInt8]) throws(DeviceKeyError) {
        do throws(CryptoError) {
            let root = try DERNode.parse(der)
            guard root.isUniversal(DERNode.sequence), root.constructed else { throw Self.fail("KeyDescription is not a SEQUENCE") }
            let f = try root.children
            guard f.count == 8 else { throw Self.fail("KeyDescription has \(f.count) members, not 8") }
            attestationVersion = try Self.integer(f[0], "attestationVersion")
            attestationSecurityLevel = try Self.securityLevel(f[1], "attestationSecurityLevel")
            keyMintVersion = try Self.integer(f[2], "keyMintVersion")
            keyMintSecurityLevel = try Self.securityLevel(f[3], "keyMintSecurityLevel")
            attestationChallenge = try Self.octets(f[4], "attestationChallenge")
            guard attestationChallenge.count <= Self.maxChallengeLength else { throw Self.fail("attestationChallenge is longer than 128 bytes") }
            uniqueId = try Self.octets(f[5], "uniqueId")
            softwareEnforced = try AuthorizationList(f[6], name: "softwareEnforced")
            hardwareEnforced = try AuthorizationList(f[7], name: "hardwareEnforced")
        } catch {
            throw DeviceKeyError(.attestationInvalid, "key description: \(error.reason)")
        }
    }

    /// The extension of `certificate`, which must carry it exactly once.
    public init(certificate: Certificate) throws(DeviceKeyError) {
        let found = certificate.extensions.filter { $0.oid == Self.oid }
        guard !found.isEmpty else { throw DeviceKeyError(.attestationInvalid, "the leaf certificate has no key description extension") }
        guard found.count == 1 else { throw DeviceKeyError(.attestationInvalid, "the leaf certificate has the key description extension twice") }
        try self.init(der: found[0].value)
    }

    // MARK: - Authorization lists

    /// `AuthorizationList ::= SEQUENCE { … }`, one optional `[tag] EXPLICIT` member per Keymaster/KeyMint tag.
    public struct AuthorizationList: Sendable {
        public var purposes: [Int]? = nil                 // [1]   SET OF INTEGER (KeyPurpose: SIGN = 2, ATTEST_KEY = 7, …)
        public var algorithm: Int? = nil                  // [2]   INTEGER (RSA = 1, EC = 3, …)
        public var keySize: Int? = nil                    // [3]
        public var digests: [Int]? = nil                  // [5]   SET OF INTEGER
        public var paddings: [Int]? = nil                 // [6]   SET OF INTEGER
        public var ecCurve: Int? = nil                    // [10]  INTEGER (P_224 = 0, P_256 = 1, P_384 = 2, P_521 = 3, CURVE_25519 = 4)
        public var rsaPublicExponent: Int? = nil          // [200]
        public var mgfDigests: [Int]? = nil               // [203] SET OF INTEGER (KeyMint 100)
        public var rollbackResistance = false             // [303] NULL
        public var earlyBootOnly = false                  // [305] NULL
        public var activeDateTime: Int? = nil             // [400] ms since the epoch
        public var originationExpireDateTime: Int? = nil  // [401]
        public var usageExpireDateTime: Int? = nil        // [402]
        public var usageCountLimit: Int? = nil            // [405]
        public var noAuthRequired = false                 // [503] NULL
        public var userAuthType: Int? = nil               // [504] HardwareAuthenticatorType bits (PASSWORD = 1, FINGERPRINT = 2)
        public var authTimeout: Int? = nil                // [505] seconds
        public var allowWhileOnBody = false               // [506] NULL
        public var trustedUserPresenceRequired = false    // [507] NULL
        public var trustedConfirmationRequired = false    // [508] NULL
        public var unlockedDeviceRequired = false         // [509] NULL
        public var allApplications = false                // [600] NULL (Keymaster only)
        public var applicationId: [UInt8]? = nil          // [601] OCTET STRING
        public var creationDateTime: Int? = nil           // [701] ms since the epoch
        public var origin: Int? = nil                     // [702] INTEGER (GENERATED = 0, DERIVED = 1, IMPORTED = 2, …)
        public var rollbackResistant = false              // [703] NULL (Keymaster 2/3)
        public var rootOfTrust: RootOfTrust? = nil        // [704]
        public var osVersion: Int? = nil                  // [705]
        public var osPatchLevel: Int? = nil               // [706]
        public var attestationApplicationId: AttestationApplicationId? = nil  // [709] OCTET STRING holding the DER
        public var attestationIds: [(name: String, value: [UInt8])] = []     // [710]–[717], [723] OCTET STRING
        public var vendorPatchLevel: Int? = nil           // [718]
        public var bootPatchLevel: Int? = nil             // [719]
        public var deviceUniqueAttestation = false        // [720] NULL
        public var moduleHash: [UInt8]? = nil             // [724] OCTET STRING (KeyMint 400)
        /// Every tag present, in order; `unknownTags` those not listed above.
        public var tags: [UInt64] = []
        public var unknownTags: [UInt64] = []

        static let attestationIdNames: [UInt64: String] = [
            710: "brand", 711: "device", 712: "product", 713: "serial", 714: "imei", 715: "meid",
            716: "manufacturer", 717: "model", 723: "secondImei",
        ]

        init(_ node: DERNode, name: String) throws(CryptoError) {
            guard node.isUniversal(DERNode.sequence), node.constructed else { throw fail("\(name) is not a SEQUENCE") }
            var previous: UInt64? = nil
            for member in try node.children {
                let tag = member.tagNumber
                guard member.tagClass == .contextSpecific, member.constructed else { throw fail("\(name): a member is not an EXPLICIT tag") }
                if let previous, tag <= previous {
                    throw fail(tag == previous ? "\(name): tag [\(tag)] repeats" : "\(name): tag [\(tag)] is out of ascending order")
                }
                previous = tag
                let inner = try member.children
                guard inner.count == 1 else { throw fail("\(name): tag [\(tag)] must wrap exactly one value") }
                let v = inner[0]
                let label = "\(name) [\(tag)]"
                switch tag {
                case 1: purposes = try AndroidKeyDescription.integerSet(v, label)
                case 2: algorithm = try AndroidKeyDescription.integer(v, label)
                case 3: keySize = try AndroidKeyDescription.integer(v, label)
                case 5: digests = try AndroidKeyDescription.integerSet(v, label)
                case 6: paddings = try AndroidKeyDescription.integerSet(v, label)
                case 10: ecCurve = try AndroidKeyDescription.integer(v, label)
                case 200: rsaPublicExponent = try AndroidKeyDescription.integer(v, label)
                case 203: mgfDigests = try AndroidKeyDescription.integerSet(v, label)
                case 303: rollbackResistance = try AndroidKeyDescription.null(v, label)
                case 305: earlyBootOnly = try AndroidKeyDescription.null(v, label)
                case 400: activeDateTime = try AndroidKeyDescription.integer(v, label)
                case 401: originationExpireDateTime = try AndroidKeyDescription.integer(v, label)
                case 402: usageExpireDateTime = try AndroidKeyDescription.integer(v, label)
                case 405: usageCountLimit = try AndroidKeyDescription.integer(v, label)
                case 503: noAuthRequired = try AndroidKeyDescription.null(v, label)
                case 504: userAuthType = try AndroidKeyDescription.integer(v, label)
                case 505: authTimeout = try AndroidKeyDescription.integer(v, label)
                case 506: allowWhileOnBody = try AndroidKeyDescription.null(v, label)
                case 507: trustedUserPresenceRequired = try AndroidKeyDescription.null(v, label)
                case 508: trustedConfirmationRequired = try AndroidKeyDescription.null(v, label)
                case 509: unlockedDeviceRequired = try AndroidKeyDescription.null(v, label)
                case 600: allApplications = try AndroidKeyDescription.null(v, label)
                case 601: applicationId = try AndroidKeyDescription.octets(v, label)
                case 701: creationDateTime = try AndroidKeyDescription.integer(v, label)
                case 702: origin = try AndroidKeyDescription.integer(v, label)
                case 703: rollbackResistant = try AndroidKeyDescription.null(v, label)
                case 704: rootOfTrust = try RootOfTrust(v)
                case 705: osVersion = try AndroidKeyDescription.integer(v, label)
                case 706: osPatchLevel = try AndroidKeyDescription.integer(v, label)
                case 709:
                    let bytes = try AndroidKeyDescription.octets(v, label)
                    attestationApplicationId = try AttestationApplicationId(der: bytes)
                case 710...717, 723:
                    attestationIds.append((name: Self.attestationIdNames[tag]!, value: try AndroidKeyDescription.octets(v, label)))
                case 718: vendorPatchLevel = try AndroidKeyDescription.integer(v, label)
                case 719: bootPatchLevel = try AndroidKeyDescription.integer(v, label)
                case 720: deviceUniqueAttestation = try AndroidKeyDescription.null(v, label)
                case 724: moduleHash = try AndroidKeyDescription.octets(v, label)
                default: unknownTags.append(tag)
                }
                tags.append(tag)
            }
        }

        public var json: JSONValue {
            var m: [(key: String, value: JSONValue)] = []
            func int(_ k: String, _ v: Int?) { if let v { m.append((k, .number(Double(v)))) } }
            func ints(_ k: String, _ v: [Int]?) { if let v { m.append((k, .array(v.map { .number(Double($0)) }))) } }
            func flag(_ k: String, _ v: Bool) { if v { m.append((k, true)) } }
            func hex(_ k: String, _ v: [UInt8]?) { if let v { m.append((k, .string(Hex.encode(v)))) } }
            ints("purpose", purposes); int("algorithm", algorithm); int("keySize", keySize)
            ints("digest", digests); ints("padding", paddings); int("ecCurve", ecCurve)
            int("rsaPublicExponent", rsaPublicExponent); ints("mgfDigest", mgfDigests)
            flag("rollbackResistance", rollbackResistance); flag("earlyBootOnly", earlyBootOnly)
            int("activeDateTime", activeDateTime); int("originationExpireDateTime", originationExpireDateTime)
            int("usageExpireDateTime", usageExpireDateTime); int("usageCountLimit", usageCountLimit)
            flag("noAuthRequired", noAuthRequired); int("userAuthType", userAuthType); int("authTimeout", authTimeout)
            flag("allowWhileOnBody", allowWhileOnBody); flag("trustedUserPresenceRequired", trustedUserPresenceRequired)
            flag("trustedConfirmationRequired", trustedConfirmationRequired); flag("unlockedDeviceRequired", unlockedDeviceRequired)
            flag("allApplications", allApplications); hex("applicationId", applicationId)
            int("creationDateTime", creationDateTime); int("origin", origin); flag("rollbackResistant", rollbackResistant)
            if let rootOfTrust { m.append(("rootOfTrust", rootOfTrust.json)) }
            int("osVersion", osVersion); int("osPatchLevel", osPatchLevel)
            if let attestationApplicationId { m.append(("attestationApplicationId", attestationApplicationId.json)) }
            if !attestationIds.isEmpty {
                m.append(("attestationIds", .object(attestationIds.map { ($0.name, .string(AndroidKeyDescription.text($0.value))) })))
            }
            int("vendorPatchLevel", vendorPatchLevel); int("bootPatchLevel", bootPatchLevel)
            flag("deviceUniqueAttestation", deviceUniqueAttestation); hex("moduleHash", moduleHash)
            if !unknownTags.isEmpty { m.append(("unknownTags", .array(unknownTags.map { .number(Double($0)) }))) }
            return .object(m)
        }
    }

    /// `RootOfTrust ::= SEQUENCE { verifiedBootKey OCTET STRING, deviceLocked BOOLEAN,
    /// verifiedBootState ENUMERATED { Verified(0), SelfSigned(1), Unverified(2), Failed(3) },
    /// verifiedBootHash OCTET STRING }` — the hash since attestation version 3.
    public struct RootOfTrust: Sendable {
        public enum VerifiedBootState: Int, Sendable { case verified = 0, selfSigned = 1, unverified = 2, failed = 3 }
        public let verifiedBootKey: [UInt8]
        public let deviceLocked: Bool
        public let verifiedBootState: VerifiedBootState
        public let verifiedBootHash: [UInt8]?

        init(_ node: DERNode) throws(CryptoError) {
            guard node.isUniversal(DERNode.sequence), node.constructed else { throw fail("rootOfTrust is not a SEQUENCE") }
            let f = try node.children
            guard f.count == 3 || f.count == 4 else { throw fail("rootOfTrust has \(f.count) members, not 3 or 4") }
            verifiedBootKey = try AndroidKeyDescription.octets(f[0], "rootOfTrust.verifiedBootKey")
            guard f[1].isUniversal(DERNode.boolean), !f[1].constructed, f[1].content.count == 1,
                  f[1].content.first == 0 || f[1].content.first == 0xFF
            else { throw fail("rootOfTrust.deviceLocked is not a DER BOOLEAN") }
            deviceLocked = f[1].content.first == 0xFF
            guard f[2].isUniversal(DERNode.enumerated) else { throw fail("rootOfTrust.verifiedBootState is not ENUMERATED") }
            guard let state = VerifiedBootState(rawValue: try AndroidKeyDescription.integer(f[2], "rootOfTrust.verifiedBootState", tag: DERNode.enumerated))
            else { throw fail("rootOfTrust.verifiedBootState is not 0…3") }
            verifiedBootState = state
            verifiedBootHash = f.count == 4 ? try AndroidKeyDescription.octets(f[3], "rootOfTrust.verifiedBootHash") : nil
        }

        public var json: JSONValue {
            let names = ["Verified", "SelfSigned", "Unverified", "Failed"]
            var m: [(key: String, value: JSONValue)] = [
                ("verifiedBootKey", .string(Hex.encode(verifiedBootKey))),
                ("deviceLocked", .bool(deviceLocked)),
                ("verifiedBootState", .string(names[verifiedBootState.rawValue])),
            ]
            if let verifiedBootHash { m.append(("verifiedBootHash", .string(Hex.encode(verifiedBootHash)))) }
            return .object(m)
        }
    }

    /// `AttestationApplicationId ::= SEQUENCE { packageInfos SET OF AttestationPackageInfo,
    /// signatureDigests SET OF OCTET STRING }`, `AttestationPackageInfo ::= SEQUENCE { packageName
    /// OCTET STRING, version INTEGER }`. Several packages appear when they share one Linux UID; the
    /// digests (SHA-256 of each signing certificate) are those of that UID.
    public struct AttestationApplicationId: Sendable {
        public let packages: [(name: String, version: Int)]
        public let signatureDigests: [[UInt8]]

        init(der: [UInt8]) throws(CryptoError) {
            let root = try DERNode.parse(der)
            guard root.isUniversal(DERNode.sequence), root.constructed else { throw fail("attestationApplicationId is not a SEQUENCE") }
            let f = try root.children
            guard f.count == 2, f[0].isUniversal(DERNode.set), f[1].isUniversal(DERNode.set), f[0].constructed, f[1].constructed
            else { throw fail("attestationApplicationId is not SEQUENCE { SET, SET }") }
            var packages: [(name: String, version: Int)] = []
            for info in try f[0].children {
                guard info.isUniversal(DERNode.sequence), info.constructed else { throw fail("attestationApplicationId: a package info is not a SEQUENCE") }
                let p = try info.children
                guard p.count == 2 else { throw fail("attestationApplicationId: a package info has \(p.count) members, not 2") }
                let nameBytes = try AndroidKeyDescription.octets(p[0], "attestationApplicationId.packageName")
                let name = String(decoding: nameBytes, as: UTF8.self)
                guard Array(name.utf8) == nameBytes, !name.isEmpty else { throw fail("attestationApplicationId: a package name is not UTF-8") }
                packages.append((name: name, version: try AndroidKeyDescription.integer(p[1], "attestationApplicationId.version")))
            }
            var digests: [[UInt8]] = []
            for d in try f[1].children { digests.append(try AndroidKeyDescription.octets(d, "attestationApplicationId.signatureDigest")) }
            self.packages = packages
            signatureDigests = digests
        }

        public var json: JSONValue {
            .object([
                ("packages", .array(packages.map { .object([("name", .string($0.name)), ("version", .number(Double($0.version)))]) })),
                ("signatureDigests", .array(signatureDigests.map { .string(AndroidKeyDescription.fingerprint($0)) })),
            ])
        }
    }

    // MARK: - Decoding helpers (strict DER)

    static func fail(_ why: String) -> CryptoError { CryptoError(.invalidCertificate, why) }

    /// A non-negative INTEGER (or ENUMERATED) in minimal DER form that fits in an Int64.
    static func integer(_ node: DERNode, _ name: String, tag: UInt64 = DERNode.integer) throws(CryptoError) -> Int {
        guard node.isUniversal(tag), !node.constructed else { throw fail("\(name) is not an \(tag == DERNode.integer ? "INTEGER" : "ENUMERATED")") }
        let c = Array(node.content)
        guard let first = c.first else { throw fail("\(name) is an empty INTEGER") }
        guard first & 0x80 == 0 else { throw fail("\(name) is negative") }
        guard c.count == 1 || !(first == 0 && c[1] & 0x80 == 0) else { throw fail("\(name) is not minimally encoded") }
        let magnitude = first == 0 ? c.dropFirst() : c[...]
        guard magnitude.count <= 8, !(magnitude.count == 8 && magnitude.first! & 0x80 != 0) else { throw fail("\(name) is too large") }
        var v = 0
        for b in magnitude { v = v << 8 | Int(b) }
        return v
    }

    static func securityLevel(_ node: DERNode, _ name: String) throws(CryptoError) -> SecurityLevel {
        guard let level = SecurityLevel(rawValue: try integer(node, name, tag: DERNode.enumerated)) else {
            throw fail("\(name) is not Software, TrustedEnvironment or StrongBox")
        }
        return level
    }

    static func integerSet(_ node: DERNode, _ name: String) throws(CryptoError) -> [Int] {
        guard node.isUniversal(DERNode.set), node.constructed else { throw fail("\(name) is not a SET OF INTEGER") }
        var out: [Int] = []
        for item in try node.children { out.append(try integer(item, name)) }
        return out
    }

    static func octets(_ node: DERNode, _ name: String) throws(CryptoError) -> [UInt8] {
        guard node.isUniversal(DERNode.octetString), !node.constructed else { throw fail("\(name) is not an OCTET STRING") }
        return Array(node.content)
    }

    static func null(_ node: DERNode, _ name: String) throws(CryptoError) -> Bool {
        guard node.isUniversal(DERNode.null), !node.constructed, node.content.isEmpty else { throw fail("\(name) is not NULL") }
        return true
    }


    /// `AB:CD:…`, the form `keytool` and the `--app` flag use.
    static func fingerprint(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789ABCDEF")
        return bytes.map { String([digits[Int($0 >> 4)], digits[Int($0 & 0x0F)]]) }.joined(separator: ":")
    }

    /// Printable ASCII as text (attestation ids are ASCII); anything else as hex.
    static func text(_ bytes: [UInt8]) -> String {
        bytes.allSatisfy({ (0x20...0x7E).contains($0) }) ? String(decoding: bytes, as: UTF8.self) : Hex.encode(bytes)
    }

    // MARK: - Reporting

    static let algorithmNames = [1: "RSA", 3: "EC", 32: "AES", 33: "3DES", 128: "HMAC"]
    static let purposeNames = [0: "ENCRYPT", 1: "DECRYPT", 2: "SIGN", 3: "VERIFY", 5: "WRAP_KEY", 6: "AGREE_KEY", 7: "ATTEST_KEY"]

    public var json: JSONValue {
        .object([
            ("attestationVersion", .number(Double(attestationVersion))),
            ("attestationSecurityLevel", .string(attestationSecurityLevel.description)),
            ("keyMintVersion", .number(Double(keyMintVersion))),
            ("keyMintSecurityLevel", .string(keyMintSecurityLevel.description)),
            ("attestationChallenge", .string(Base64URL.encode(attestationChallenge))),
            ("uniqueId", .string(Hex.encode(uniqueId))),
            ("softwareEnforced", softwareEnforced.json),
            ("hardwareEnforced", hardwareEnforced.json),
        ])
    }
}
