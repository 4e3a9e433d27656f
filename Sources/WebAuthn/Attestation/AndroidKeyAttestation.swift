import Crypto
import JSON

/// WebAuthn L3 §8.4: the `android-key` format. The credential key lives in Android Keystore; the
/// leaf of x5c certifies that key and carries the Keystore's key description extension.
public enum AndroidKeyAttestation: AttestationFormat {
    public static let identifier = "android-key"
    /// Android Key Attestation extension holding the KeyDescription.
    static let keyDescriptionOID = "1.3.6.1.4.1.11129.2.1.17"

    public static func verify(_ input: AttestationInput, trace: VerificationTrace?) throws(WebAuthnError) -> AttestationResult {
        // Step 1: attStmt is CBOR {alg, sig, x5c}; parse it before checking anything.
        try input.requireOnly(["alg", "sig", "x5c"])
        let alg = try input.int("alg")
        let sig = try input.bytes("sig")
        let scheme = try attestationSignatureAlgorithm(alg, format: identifier)
        guard let x5c = try input.certificates() else { throw .attestation("android-key: attStmt.x5c is missing") }
        let leaf = x5c[0]
        let leafKey: PublicKey
        do { leafKey = try leaf.publicKey } catch { throw .attestation("android-key: attestation certificate key is unsupported") }

        // Step 2: sig is a valid signature over authenticatorData || clientDataHash with the leaf's
        // public key and the algorithm in alg.
        try trace.require("attestation.android-key.signature",
                          leafKey.verify(signature: sig, message: input.signedData, algorithm: scheme),
                          .attestation("android-key: signature does not verify with the attestation certificate"))

        // Step 3: the leaf's public key is the credential public key.
        try trace.require("attestation.android-key.publicKey", leafKey.isSameKey(as: input.credential.publicKey.publicKey),
                          .attestation("android-key: credential key differs from the certificate key"))

        // Step 4: the key description extension, parsed in full before any of its fields is used.
        guard let ext = leaf.extension(keyDescriptionOID) else {
            try trace.fail("attestation.android-key.extension", .attestation("android-key: key description extension is missing"))
        }
        let description: KeyDescription
        do { description = try KeyDescription(der: ext.value) } catch {
            try trace.fail("attestation.android-key.keyDescription",
                           .attestation("android-key: key description does not parse: \(error.reason)"))
        }
        trace.pass("attestation.android-key.keyDescription")
        trace.decoded("androidKey", description.json)
        let software = description.softwareEnforced, tee = description.teeEnforced

        // Step 4a: attestationChallenge is the clientDataHash.
        try trace.require("attestation.android-key.challenge",
                          constantTimeEquals(description.attestationChallenge, input.clientDataHash),
                          .attestation("android-key: attestationChallenge differs from clientDataHash"))

        // Step 4b: the key is scoped to the RP: allApplications is absent from both lists.
        try trace.require("attestation.android-key.allApplications", !software.allApplications && !tee.allApplications,
                          .attestation("android-key: key is usable by all applications"))

        // Step 4c: origin is KM_ORIGIN_GENERATED and purpose contains KM_PURPOSE_SIGN. The RP may
        // look at teeEnforced alone or at the union of both lists; Latchkey takes the union (the
        // spec's default for RPs that do not require TEE enforcement; w3c/webauthn#1980: each
        // property may be enforced by either layer). Trust in the key's home comes from the chain
        // (step 23), not from which list a property sits in. A list that states a different origin
        // is a contradiction and fails even when the other list says "generated".
        let origins = [software.origin, tee.origin].compactMap { $0 }
        try trace.require("attestation.android-key.origin",
                          !origins.isEmpty && origins.allSatisfy { $0 == KeyDescription.originGenerated },
                          .attestation("android-key: key origin is not KM_ORIGIN_GENERATED"))
        try trace.require("attestation.android-key.purpose",
                          (software.purposes + tee.purposes).contains(KeyDescription.purposeSign),
                          .attestation("android-key: key purpose does not include KM_PURPOSE_SIGN"))

        // The chain's own link (leaf by its issuer) holds even when no root is configured.
        try checkLeafSignedByIssuer(x5c, format: identifier, trace: trace)

        // Step 5: attestation type Basic, trust path x5c.
        return AttestationResult(type: .basic, trustPath: x5c, algorithm: COSEAlgorithm(alg))
    }
}

/// The Android Keystore KeyDescription (Android key attestation extension schema):
///
///     KeyDescription ::= SEQUENCE {
///         attestationVersion INTEGER, attestationSecurityLevel SecurityLevel (ENUMERATED),
///         keymasterVersion INTEGER, keymasterSecurityLevel SecurityLevel (ENUMERATED),
///         attestationChallenge OCTET STRING, uniqueId OCTET STRING,
///         softwareEnforced AuthorizationList, teeEnforced AuthorizationList }
///
/// Only the members WebAuthn §8.4 needs are kept; every member's type is still checked.
struct KeyDescription {
    static let originGenerated = 0   // KM_ORIGIN_GENERATED
    static let purposeSign = 2       // KM_PURPOSE_SIGN

    let attestationVersion: Int
    let attestationSecurityLevel: Int
    let keymasterVersion: Int
    let keymasterSecurityLevel: Int
    let attestationChallenge: [UInt8]
    let softwareEnforced: AuthorizationList
    let teeEnforced: AuthorizationList

    init(der: [UInt8]) throws(CryptoError) {
        func fail(_ why: String) -> CryptoError { CryptoError(.invalidCertificate, why) }
        let root = try DERNode.parse(der)
        guard root.isUniversal(DERNode.sequence) else { throw fail("KeyDescription is not a SEQUENCE") }
        let f = try root.children
        guard f.count == 8 else { throw fail("KeyDescription must have 8 members") }
        guard f[0].isUniversal(DERNode.integer), f[1].isUniversal(DERNode.enumerated),
              f[2].isUniversal(DERNode.integer), f[3].isUniversal(DERNode.enumerated),
              f[4].isUniversal(DERNode.octetString), f[5].isUniversal(DERNode.octetString),
              f[6].isUniversal(DERNode.sequence), f[7].isUniversal(DERNode.sequence)
        else { throw fail("KeyDescription member has the wrong type") }
        attestationVersion = try f[0].intValue
        attestationSecurityLevel = try f[1].intValue
        keymasterVersion = try f[2].intValue
        keymasterSecurityLevel = try f[3].intValue
        attestationChallenge = Array(f[4].content)
        softwareEnforced = try AuthorizationList(f[6])
        teeEnforced = try AuthorizationList(f[7])
    }

    var json: JSONValue {
        [
            "attestationVersion": .number(Double(attestationVersion)),
            "attestationSecurityLevel": .number(Double(attestationSecurityLevel)),
            "keymasterVersion": .number(Double(keymasterVersion)),
            "keymasterSecurityLevel": .number(Double(keymasterSecurityLevel)),
            "softwareEnforced": softwareEnforced.json,
            "teeEnforced": teeEnforced.json,
        ]
    }

    /// AuthorizationList ::= SEQUENCE of optional members, each `[tag] EXPLICIT <type>`, with
    /// tag numbers above 30 (high-tag-number form). Unknown members are skipped, but each must
    /// still be a well-formed EXPLICIT wrapper around exactly one value, and no tag may repeat.
    struct AuthorizationList {
        static let purposeTag: UInt64 = 1, allApplicationsTag: UInt64 = 600, originTag: UInt64 = 702

        var purposes: [Int] = []
        var allApplications = false
        var origin: Int? = nil
        var tags: [UInt64] = []

        init(_ node: DERNode) throws(CryptoError) {
            func fail(_ why: String) -> CryptoError { CryptoError(.invalidCertificate, "AuthorizationList: \(why)") }
            var seen = Set<UInt64>()
            for member in try node.children {
                guard member.tagClass == .contextSpecific, member.constructed else { throw fail("member is not an EXPLICIT tag") }
                guard seen.insert(member.tagNumber).inserted else { throw fail("tag [\(member.tagNumber)] repeats") }
                let inner = try member.children
                guard inner.count == 1 else { throw fail("tag [\(member.tagNumber)] must wrap one value") }
                let value = inner[0]
                switch member.tagNumber {
                case Self.purposeTag:  // purpose [1] EXPLICIT SET OF INTEGER
                    guard value.isUniversal(DERNode.set) else { throw fail("purpose is not a SET") }
                    for item in try value.children {
                        guard item.isUniversal(DERNode.integer) else { throw fail("purpose holds a non-INTEGER") }
                        purposes.append(try item.intValue)
                    }
                case Self.allApplicationsTag:  // allApplications [600] EXPLICIT NULL
                    guard value.isUniversal(DERNode.null), value.content.isEmpty else { throw fail("allApplications is not NULL") }
                    allApplications = true
                case Self.originTag:  // origin [702] EXPLICIT INTEGER
                    guard value.isUniversal(DERNode.integer) else { throw fail("origin is not an INTEGER") }
                    origin = try value.intValue
                default:
                    break
                }
                tags.append(member.tagNumber)
            }
        }

        var json: JSONValue {
            var members: [(key: String, value: JSONValue)] = [
                ("tags", .array(tags.map { .number(Double($0)) })),
                ("purpose", .array(purposes.map { .number(Double($0)) })),
                ("allApplications", .bool(allApplications)),
            ]
            if let origin { members.append(("origin", .number(Double(origin)))) }
            return .object(members)
        }
    }
}
