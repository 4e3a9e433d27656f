import Crypto
import JSON

/// A FIDO MDS3 BLOB as downloaded (MDS3 §3.1.7: a JWT in JWS compact serialisation), split into
/// its parts but not trusted yet: nothing in it means anything until `MetadataBLOB.verify`.
public struct ParsedMetadataBLOB: Sendable {
    /// The JWS `alg` header: `ES256` or `RS256`.
    public let algorithm: String
    /// The `x5c` header, leaf (the BLOB signer) first.
    public let certificates: [Certificate]
    let signingInput: [UInt8]
    let signature: [UInt8]
    let payload: [UInt8]

    /// The largest BLOB accepted (the live one is a few MiB).
    public static let maxBytes = 64 << 20

    public init(bytes: [UInt8]) throws(WebAuthnError) {
        guard bytes.count <= Self.maxBytes else { throw .metadata("BLOB is larger than \(Self.maxBytes) bytes") }
        var text = bytes[...]
        while let last = text.last, last == 0x0A || last == 0x0D || last == 0x20 { text = text.dropLast() }
        let parts = text.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw .metadata("BLOB is not a JWS in compact serialisation (three dot-separated parts)") }
        func decode(_ part: ArraySlice<UInt8>, _ what: String) throws(WebAuthnError) -> [UInt8] {
            let decoded = Array(part).withUnsafeBufferPointer { Base64URL.decode(utf8: $0) }
            guard let decoded else { throw .metadata("BLOB \(what) is not base64url") }
            return decoded
        }
        let headerBytes = try decode(parts[0], "header")
        payload = try decode(parts[1], "payload")
        signature = try decode(parts[2], "signature")
        signingInput = Array(parts[0]) + [UInt8(ascii: ".")] + Array(parts[1])
        let header: JSONValue
        do { header = try JSONParser.parse(headerBytes, maxDepth: 4) } catch { throw .metadata("BLOB header is not JSON") }
        guard let alg = header["alg"]?.stringValue else { throw .metadata("BLOB header has no alg") }
        guard alg == "ES256" || alg == "RS256" else { throw .metadata("BLOB alg \(alg) is not ES256 or RS256") }
        algorithm = alg
        // MDS3 §3.2: the signer is named by x5c (x5u, a URL to fetch, is not supported offline).
        guard let chain = header["x5c"]?.arrayValue, !chain.isEmpty, chain.count <= 8 else {
            throw .metadata("BLOB header must carry x5c with 1 to 8 certificates")
        }
        var certificates: [Certificate] = []
        for item in chain {
            guard let b64 = item.stringValue, let der = Base64.decodeStandard(b64), let cert = try? Certificate(der: der) else {
                throw .metadata("BLOB header x5c holds something other than a base64 DER certificate")
            }
            certificates.append(cert)
        }
        self.certificates = certificates
    }
}

/// A BLOB whose signature chains to the configured root: its number, freshness and entries.
/// Only `verify` makes one, so code that takes a `MetadataBLOB` is handed trusted metadata.
public struct MetadataBLOB: Sendable {
    /// `no`: the serial number of this BLOB (a later BLOB has a larger one).
    public let number: Int
    /// `nextUpdate` as written (`YYYY-MM-DD`) and as midnight UTC in seconds since 1970.
    public let nextUpdate: String
    public let nextUpdateTime: Int64
    public let legalHeader: String?
    /// Every entry that decoded, in BLOB order.
    public let entries: [MetadataEntry]
    /// Entries that did not decode (index in the BLOB, reason): they vouch for nothing.
    public let skipped: [(index: Int, reason: String)]
    /// The signer's chain as validated, leaf first, root last.
    public let signerChain: [Certificate]
    private let byAAGUID: [[UInt8]: Int]
    private let byKeyIdentifier: [String: Int]

    public func entry(aaguid: [UInt8]) -> MetadataEntry? { byAAGUID[aaguid].map { entries[$0] } }
    public func entry(keyIdentifier: String) -> MetadataEntry? { byKeyIdentifier[keyIdentifier.lowercased()].map { entries[$0] } }

    /// The name the FIDO Alliance's BLOB signing certificate carries (subjectAltName dNSName and CN).
    public static let defaultSigner = "mds.fidoalliance.org"

    /// MDS3 §3.2 "Metadata BLOB object processing rules", offline:
    /// the x5c chain leads to one of `roots` at `now` with no certificate expired or revoked by
    /// `crls` (steps 3-4); the signing certificate names `signer` (SPEC: LATCHKEY_MDS_SIGNER); the JWS
    /// signature verifies with the signer's key (step 5); the payload decodes; `nextUpdate` is not
    /// past by more than `maxStaleSeconds` (SPEC: LATCHKEY_MDS_MAX_STALE).
    /// Whatever fails, the whole BLOB is refused (`metadata_invalid`). Check names `blob.*`.
    /// Rollback (a `no` below the last accepted one) is the caller's: it needs the stored number.
    public static func verify(_ parsed: ParsedMetadataBLOB, roots: [Certificate], crls: [CertificateRevocationList] = [],
                              signer: String = defaultSigner, maxStaleSeconds: Int64 = 2_592_000, at now: Int64,
                              trace: VerificationTrace? = nil) throws(WebAuthnError) -> MetadataBLOB {
        trace.decoded("blob", .object([
            ("alg", .string(parsed.algorithm)),
            ("x5c", .array(parsed.certificates.map { .string($0.commonName) })),
        ]))
        // Steps 3-4: the signer's chain, to the root, at `now`, with CRLs where configured.
        let leaf = parsed.certificates[0]
        let chain: [Certificate]
        do {
            chain = try CertificatePath.validate(leaf: leaf, intermediates: Array(parsed.certificates.dropFirst()), anchors: roots,
                                                 at: now, crls: crls)
            trace.pass("blob.chain", chain.map(\.commonName).joined(separator: " → "))
        } catch {
            try trace.fail("blob.chain", .metadata("BLOB signer: \(error.reason)"))
        }
        // SPEC: any certificate the root issued chains; only the one naming the signer may sign.
        try requireSignerName(leaf, signer, trace: trace)
        // Step 5: the JWS signature (RFC 7515 §5.2) with the signer's key; ES256 is raw r||s (RFC 7518 §3.4).
        let key: PublicKey
        do { key = try leaf.publicKey } catch { try trace.fail("blob.signature", .metadata("BLOB signer key is unsupported")) }
        let valid: Bool
        switch parsed.algorithm {
        case "ES256":
            let der = try? ECDSASignature.derFromRaw(parsed.signature)
            valid = parsed.signature.count == 64 && der.map { key.verify(signature: $0, message: parsed.signingInput, algorithm: .ecdsa(.sha256)) } == true
        default:
            valid = key.verify(signature: parsed.signature, message: parsed.signingInput, algorithm: .rsaPKCS1(.sha256))
        }
        try trace.require("blob.signature", valid, .metadata("BLOB signature does not verify with its signer's key"))

        // The payload (MDS3 §3.1.6 MetadataBLOBPayload).
        let payload: JSONValue
        do { payload = try JSONParser.parse(parsed.payload, maxDepth: 64) } catch {
            try trace.fail("blob.payload", .metadata("BLOB payload is not JSON: \(error.reason)"))
        }
        guard let number = payload["no"]?.intValue, number >= 0 else { try trace.fail("blob.payload", .metadata("BLOB payload has no number (no)")) }
        guard let next = payload["nextUpdate"]?.stringValue, let nextTime = parseDate(next) else {
            try trace.fail("blob.payload", .metadata("BLOB nextUpdate is not a YYYY-MM-DD date"))
        }
        guard let items = payload["entries"]?.arrayValue else { try trace.fail("blob.payload", .metadata("BLOB payload has no entries")) }
        var entries: [MetadataEntry] = []
        var skipped: [(index: Int, reason: String)] = []
        var byAAGUID: [[UInt8]: Int] = [:]
        var byKey: [String: Int] = [:]
        for (i, item) in items.enumerated() {
            do {
                let entry = try MetadataEntry(json: item)
                if let aaguid = entry.aaguid { byAAGUID[aaguid] = byAAGUID[aaguid] ?? entries.count }
                for id in entry.attestationCertificateKeyIdentifiers { byKey[id] = byKey[id] ?? entries.count }
                entries.append(entry)
            } catch {
                skipped.append((index: i, reason: error.reason))
            }
        }
        trace.pass("blob.payload", "\(entries.count) entries, \(skipped.count) skipped")
        // Step 6 / SPEC: a BLOB whose nextUpdate is past by more than the allowed staleness is refused.
        try trace.require("blob.nextUpdate", now <= nextTime + maxStaleSeconds,
                          .metadata("BLOB nextUpdate \(next) is more than \(maxStaleSeconds / 86400) days past"))
        trace.decoded("payload", .object([
            ("no", .number(Double(number))), ("nextUpdate", .string(next)), ("entries", .number(Double(entries.count))),
        ]))
        return MetadataBLOB(number: number, nextUpdate: next, nextUpdateTime: nextTime,
                            legalHeader: payload["legalHeader"]?.stringValue, entries: entries, skipped: skipped,
                            signerChain: chain, byAAGUID: byAAGUID, byKeyIdentifier: byKey)
    }

    /// Parse and verify in one step.
    public static func verify(bytes: [UInt8], roots: [Certificate], crls: [CertificateRevocationList] = [],
                              signer: String = defaultSigner, maxStaleSeconds: Int64 = 2_592_000, at now: Int64,
                              trace: VerificationTrace? = nil) throws(WebAuthnError) -> MetadataBLOB {
        let parsed: ParsedMetadataBLOB
        do { parsed = try ParsedMetadataBLOB(bytes: bytes); trace.pass("blob.jws") } catch {
            try trace.fail("blob.jws", error)
        }
        return try verify(parsed, roots: roots, crls: crls, signer: signer, maxStaleSeconds: maxStaleSeconds, at: now, trace: trace)
    }

    /// SPEC "Authenticator metadata": the signing certificate names `signer` in a dNSName of its
    /// subjectAltName or, when it has no dNSName there, in its subject CN (RFC 6125 §6.4.4: a CN
    /// counts only without DNS-IDs). Exact, ASCII case-insensitive (DNS names are, RFC 4343);
    /// no wildcards. Check `blob.signer`.
    public static func requireSignerName(_ leaf: Certificate, _ signer: String, trace: VerificationTrace? = nil) throws(WebAuthnError) {
        let dnsNames: [String]
        do { dnsNames = try leaf.subjectAltNameDNSNames } catch {
            try trace.fail("blob.signer", .metadata("BLOB signer certificate: \(error.reason)"))
        }
        let (names, field) = dnsNames.isEmpty
            ? (leaf.subject.filter { $0.oid == "2.5.4.3" }.map(\.value), "subject CN")
            : (dnsNames, "subjectAltName dNSName")
        let wanted = asciiLowercased(signer)
        let named = !wanted.isEmpty && names.contains { asciiLowercased($0) == wanted }
        try trace.require("blob.signer", named, .metadata(
            "BLOB signer certificate's \(field) is \(names.isEmpty ? "empty" : names.joined(separator: ", ")), not \(signer) (LATCHKEY_MDS_SIGNER)"))
    }

    /// A–Z to a–z and nothing else: Unicode case mapping would fold look-alikes (U+212A KELVIN SIGN → k).
    private static func asciiLowercased(_ text: String) -> [UInt8] {
        text.utf8.map { (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 }
    }
}
