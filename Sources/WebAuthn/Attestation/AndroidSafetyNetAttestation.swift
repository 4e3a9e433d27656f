import CBOR
import Crypto
import JSON

/// WebAuthn L3 §8.5: the `android-safetynet` format. attStmt.response is a SafetyNet attestation:
/// a compact JWS (RFC 7515) signed by a key certified for `attest.android.com`, whose payload's
/// nonce binds authenticatorData and clientDataHash.
public enum AndroidSafetyNetAttestation: AttestationFormat {
    public static let identifier = "android-safetynet"
    static let hostname = "attest.android.com"
    /// A SafetyNet JWS is a few kilobytes; refuse to look at anything much larger.
    static let maxResponseLength = 64 * 1024

    public static func verify(_ input: AttestationInput, trace: VerificationTrace?) throws(WebAuthnError) -> AttestationResult {
        // Step 1: attStmt is CBOR {ver: text, response: bytes}; the JWS in response is parsed in full
        // (header, payload, certificates) before anything is checked. ver names the SafetyNet
        // response version; only one exists, so it is required but not interpreted.
        try input.requireOnly(["ver", "response"])
        let ver = input.statement[text: "ver"]?.textValue
        try trace.require("attestation.android-safetynet.ver", ver.map { !$0.isEmpty } ?? false,
                          .attestation("android-safetynet: attStmt.ver must be a non-empty text string"))
        let response = try input.bytes("response")
        let jws: SafetyNetJWS
        do { jws = try SafetyNetJWS(compact: response, maxLength: maxResponseLength) } catch {
            try trace.fail("attestation.android-safetynet.jws", error)
        }
        trace.pass("attestation.android-safetynet.jws")
        trace.decoded("safetyNet", jws.json)
        let leaf = jws.certificates[0]
        let leafKey: PublicKey
        do { leafKey = try leaf.publicKey } catch { throw .attestation("android-safetynet: attestation certificate key is unsupported") }

        // Step 4 (first, so that no payload claim is read before its signature holds): the response
        // came from the SafetyNet service, per the SafetyNet documentation: the JWS verifies with the
        // key of its x5c leaf …
        try trace.require("attestation.android-safetynet.signature",
                          leafKey.verify(signature: jws.signature, message: jws.signingInput, algorithm: jws.algorithm),
                          .attestation("android-safetynet: JWS signature does not verify with the attestation certificate"))
        // … the leaf is issued to the hostname attest.android.com …
        let commonNames = leaf.subject.filter { $0.oid == "2.5.4.3" }.map(\.value)
        try trace.require("attestation.android-safetynet.hostname", commonNames == [hostname],
                          .attestation("android-safetynet: attestation certificate is not issued to \(hostname)"))
        // … and its issuer (the next certificate) signed it. The rest of the path, to a trusted root
        // at `now`, is §7.1 step 23's.
        try checkLeafSignedByIssuer(jws.certificates, format: identifier, trace: trace)

        // Step 2: a valid SafetyNet response: the device passed the integrity checks the policy asks
        // for, and the attestation is fresh (timestampMs within the allowed skew of now, either side).
        if input.policy.requireCTSProfileMatch {
            try trace.require("attestation.android-safetynet.ctsProfileMatch", jws.ctsProfileMatch == true,
                              .attestation("android-safetynet: ctsProfileMatch is not true"))
        }
        try trace.require("attestation.android-safetynet.basicIntegrity", jws.basicIntegrity == true,
                          .attestation("android-safetynet: basicIntegrity is not true"))
        let skew = input.policy.safetyNetMaxSkewSeconds
        try trace.require("attestation.android-safetynet.timestamp",
                          jws.timestampMs.map { isFresh($0, now: input.now, skewSeconds: skew) } ?? false,
                          .attestation("android-safetynet: timestampMs is not within \(skew) s of now"))

        // Step 3: the payload's nonce is base64(SHA-256(authenticatorData || clientDataHash)); the
        // decoded bytes are compared, so base64 spelling variations cannot matter.
        let expectedNonce = Digest.sha256(input.signedData)
        try trace.require("attestation.android-safetynet.nonce",
                          jws.nonce.map { constantTimeEquals($0, expectedNonce) } ?? false,
                          .attestation("android-safetynet: nonce does not match authenticatorData and clientDataHash"))

        // Step 5: attestation type Basic, trust path = the JWS's x5c.
        return AttestationResult(type: .basic, trustPath: jws.certificates)
    }

    /// |timestampMs − now| ≤ skew, computed without overflow.
    static func isFresh(_ timestampMs: Int64, now: Int64, skewSeconds: Int64) -> Bool {
        let (nowMs, o1) = now.multipliedReportingOverflow(by: 1000)
        let (skewMs, o2) = max(skewSeconds, 0).multipliedReportingOverflow(by: 1000)
        let (difference, o3) = timestampMs.subtractingReportingOverflow(nowMs)
        guard !o1, !o2, !o3, difference != .min else { return false }
        return abs(difference) <= skewMs
    }
}

/// A SafetyNet attestation response, parsed but not verified: a compact JWS
/// `base64url(header).base64url(payload).base64url(signature)` (RFC 7515 §7.1) whose header
/// carries `alg` and `x5c` (standard base64 DER, leaf first, RFC 7515 §4.1.6).
struct SafetyNetJWS {
    let algorithm: SignatureAlgorithm
    let algorithmName: String
    let certificates: [Certificate]
    /// ASCII(header '.' payload): what the signature covers.
    let signingInput: [UInt8]
    /// DER for ECDSA (converted from JOSE's raw r || s), raw otherwise.
    let signature: [UInt8]
    let nonce: [UInt8]?
    let timestampMs: Int64?
    let ctsProfileMatch: Bool?
    let basicIntegrity: Bool?

    init(compact: [UInt8], maxLength: Int) throws(WebAuthnError) {
        func fail(_ why: String) -> WebAuthnError { .attestation("android-safetynet: \(why)") }
        guard compact.count <= maxLength else { throw fail("response is too large") }
        let parts = compact.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty, !parts[2].isEmpty else {
            throw fail("response is not a compact JWS")
        }
        func segment(_ part: ArraySlice<UInt8>, _ name: String) throws(WebAuthnError) -> [UInt8] {
            // base64url without padding (RFC 7515 §2); the decoder refuses any other character.
            // Bytes outside the alphabet (also invalid UTF-8, decoded as U+FFFD) make decode fail.
            guard !part.contains(UInt8(ascii: "=")), let bytes = Base64URL.decode(String(decoding: part, as: UTF8.self)) else { throw fail("JWS \(name) is not base64url") }
            return bytes
        }
        let headerBytes = try segment(parts[0], "header")
        let payloadBytes = try segment(parts[1], "payload")
        let rawSignature = try segment(parts[2], "signature")
        signingInput = Array(compact[..<parts[1].endIndex])

        let header: JSONValue, payload: JSONValue
        do { header = try JSONParser.parse(headerBytes, maxDepth: 4) } catch { throw fail("JWS header is not JSON") }
        do { payload = try JSONParser.parse(payloadBytes, maxDepth: 8) } catch { throw fail("JWS payload is not JSON") }
        guard header.objectValue != nil else { throw fail("JWS header is not an object") }
        guard payload.objectValue != nil else { throw fail("JWS payload is not an object") }
        // RFC 7515 §4.1.11: we understand no header extensions, so any "crit" must be refused.
        guard header["crit"] == nil else { throw fail("JWS header has critical extensions") }

        // Header alg (RFC 7518 §3.1) → the scheme; "none" would mean an unsigned attestation.
        guard let alg = header["alg"]?.stringValue else { throw fail("JWS header alg is missing") }
        guard alg != "none" else { throw fail("JWS is unsigned (alg none)") }
        guard let picked = Self.scheme(alg) else {
            throw WebAuthnError(.algorithmUnsupported, "android-safetynet: JWS algorithm is not supported")
        }
        algorithm = picked.scheme
        algorithmName = alg
        if let coordinateLength = picked.coordinateLength {
            // RFC 7518 §3.4: an ECDSA JWS signature is r || s, each exactly the curve's size.
            guard rawSignature.count == 2 * coordinateLength, let der = try? ECDSASignature.derFromRaw(rawSignature) else {
                throw fail("JWS ECDSA signature has the wrong length")
            }
            signature = der
        } else {
            signature = rawSignature
        }

        // Header x5c: non-empty, bounded, each a standard base64 DER certificate.
        guard let x5c = header["x5c"]?.arrayValue, !x5c.isEmpty, x5c.count <= 8 else {
            throw fail("JWS header x5c must hold 1 to 8 certificates")
        }
        var certs: [Certificate] = []
        for item in x5c {
            guard let text = item.stringValue, let der = Base64.decodeStandard(text), let cert = try? Certificate(der: der) else {
                throw fail("JWS header x5c holds something other than a base64 DER certificate")
            }
            certs.append(cert)
        }
        certificates = certs

        // Payload members (SafetyNet attestation response); absent or mistyped ones stay nil and
        // fail their checks.
        nonce = payload["nonce"]?.stringValue.flatMap { Base64.decodeStandard($0) }
        timestampMs = payload["timestampMs"]?.intValue.map { Int64($0) }
        ctsProfileMatch = payload["ctsProfileMatch"]?.boolValue
        basicIntegrity = payload["basicIntegrity"]?.boolValue
    }

    /// JOSE algorithm name → scheme, and for ECDSA the coordinate size of its curve.
    static func scheme(_ alg: String) -> (scheme: SignatureAlgorithm, coordinateLength: Int?)? {
        switch alg {
        case "RS256": (.rsaPKCS1(.sha256), nil)
        case "RS384": (.rsaPKCS1(.sha384), nil)
        case "RS512": (.rsaPKCS1(.sha512), nil)
        case "PS256": (.rsaPSS(.sha256), nil)
        case "PS384": (.rsaPSS(.sha384), nil)
        case "PS512": (.rsaPSS(.sha512), nil)
        case "ES256": (.ecdsa(.sha256), EllipticCurve.p256.coordinateLength)
        case "ES384": (.ecdsa(.sha384), EllipticCurve.p384.coordinateLength)
        case "ES512": (.ecdsa(.sha512), EllipticCurve.p521.coordinateLength)
        default: nil
        }
    }

    var json: JSONValue {
        var members: [(key: String, value: JSONValue)] = [
            ("alg", .string(algorithmName)), ("certificates", .number(Double(certificates.count))),
        ]
        if let timestampMs { members.append(("timestampMs", .number(Double(timestampMs)))) }
        if let ctsProfileMatch { members.append(("ctsProfileMatch", .bool(ctsProfileMatch))) }
        if let basicIntegrity { members.append(("basicIntegrity", .bool(basicIntegrity))) }
        return .object(members)
    }
}
