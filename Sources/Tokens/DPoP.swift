import Crypto
import JSON

/// Why a DPoP proof was refused (RFC 9449 §12.2's error codes). `reason` never contains the proof.
public struct DPoPError: Error, Hashable, CustomStringConvertible, Sendable {
    public enum Code: String, Sendable {
        /// §5, §7.1: the proof is missing, malformed, or does not fit the request or the token.
        case invalidProof = "invalid_dpop_proof"
        /// §8: a nonce was demanded and the proof carries none, or not a current one.
        case useNonce = "use_dpop_nonce"
    }
    public let code: Code
    public let reason: String
    public init(_ code: Code, _ reason: String) { self.code = code; self.reason = reason }
    public var description: String { "\(code.rawValue): \(reason)" }
    public static func == (l: DPoPError, r: DPoPError) -> Bool { l.code == r.code }
    public func hash(into h: inout Hasher) { h.combine(code) }
}

/// The JWS algorithms a proof may use (RFC 9449 §4.2: asymmetric only; `none` and MACs never).
public enum DPoPAlgorithm: String, CaseIterable, Sendable {
    case es256 = "ES256", edDSA = "EdDSA", rs256 = "RS256", ps256 = "PS256"

    var signature: SignatureAlgorithm {
        switch self {
        case .es256: .ecdsa(.sha256)
        case .edDSA: .ed25519
        case .rs256: .rsaPKCS1(.sha256)
        case .ps256: .rsaPSS(.sha256)
        }
    }
}

/// What the request a proof came with was, and what it demands (RFC 9449 §4.3).
public struct DPoPRequest: Sendable {
    /// The HTTP method, as sent.
    public var method: String
    /// The request's path as sent (still percent-encoded), without query or fragment.
    public var path: String
    /// The origins (`https://host[:port]`, no path) `htu` may name: the issuer and the allowlisted
    /// web origins.
    public var origins: [String]
    /// The access token the proof is presented with (its `ath` must match), nil at a token endpoint.
    public var accessToken: String?
    /// The thumbprint the presented token is bound to (`cnf.jkt`), or a code bound at PAR.
    public var boundKey: String?
    /// Set when the server demands a nonce: the proof's `nonce` must be one these accept now.
    public var nonces: DPoPNonces?
    public var algorithms: Set<DPoPAlgorithm>

    public init(method: String, path: String, origins: [String], accessToken: String? = nil, boundKey: String? = nil,
                nonces: DPoPNonces? = nil, algorithms: Set<DPoPAlgorithm> = Set(DPoPAlgorithm.allCases)) {
        self.method = method
        self.path = path
        self.origins = origins
        self.accessToken = accessToken
        self.boundKey = boundKey
        self.nonces = nonces
        self.algorithms = algorithms
    }
}

/// A proof that passed every check: what the server binds (`jkt`) and records (`jti`).
public struct DPoPProof: Sendable, Hashable {
    /// RFC 7638 thumbprint of the proof's public key.
    public let jkt: String
    public let jti: String
    public let iat: Int64

    /// What replay refusal records: SHA-256(jkt ‖ "." ‖ jti), one length whatever the client sent.
    public var replayKey: [UInt8] { Digest.sha256(Array((jkt + "." + jti).utf8)) }
}

/// DPoP proofs (RFC 9449): verified purely, with time passed in; replay (`jti`) is the caller's,
/// recorded in its request's one write.
public enum DPoP {
    public static let type = "dpop+jwt"
    /// §4.3 step 11: `iat` within this many seconds of now, either side.
    public static let window: Int64 = 60
    /// How long a `jti` is kept: the whole span in which a proof's `iat` is acceptable.
    public static let replayWindow: Int64 = 120
    /// A `jti` longer than this is refused (it is stored).
    public static let maximumJTILength = 128
    /// JWK members that carry private or symmetric key material (RFC 7518 §6.2.2, §6.3.2, §6.4;
    /// RFC 8037 §2): a proof whose `jwk` has one is refused (§4.3 step 7).
    static let privateMembers: Set<String> = ["d", "p", "q", "dp", "dq", "qi", "oth", "k"]

    /// `ath` (§4.2): base64url of SHA-256 of the access token's ASCII.
    public static func ath(_ accessToken: String) -> String { Base64URL.encode(Digest.sha256(Array(accessToken.utf8))) }

    /// Runs RFC 9449 §4.3's checks on `proof` against `request` at `now` (Unix seconds).
    public static func verify(_ proof: String, request: DPoPRequest, now: Int64) throws(DPoPError) -> DPoPProof {
        guard let jws = CompactJWS(proof, claimsDepth: 4) else { throw DPoPError(.invalidProof, "not a compact JWS") }
        guard jws.type == type else { throw DPoPError(.invalidProof, "typ is not dpop+jwt") }
        guard let name = jws.alg, let algorithm = DPoPAlgorithm(rawValue: name), request.algorithms.contains(algorithm) else {
            throw DPoPError(.invalidProof, "alg is not one this server accepts")
        }
        guard let jwk = jws.header["jwk"], case .object(let members) = jwk else { throw DPoPError(.invalidProof, "no jwk") }
        guard !members.contains(where: { privateMembers.contains($0.key) }) else {
            throw DPoPError(.invalidProof, "jwk holds private key material")
        }
        let (key, jkt) = try publicKey(jwk, for: algorithm)
        guard jws.verifies(with: key, algorithm: algorithm.signature) else { throw DPoPError(.invalidProof, "signature does not verify") }
        let claims = jws.claims
        guard let jti = claims["jti"]?.stringValue, !jti.isEmpty, jti.utf8.count <= maximumJTILength else {
            throw DPoPError(.invalidProof, "jti missing or too long")
        }
        guard let htm = claims["htm"]?.stringValue else { throw DPoPError(.invalidProof, "htm missing") }
        guard htm == request.method else { throw DPoPError(.invalidProof, "htm is not the request's method") }
        guard let htu = claims["htu"]?.stringValue else { throw DPoPError(.invalidProof, "htu missing") }
        guard targets(htu, request) else { throw DPoPError(.invalidProof, "htu is not this request's URI") }
        guard let iat = claims["iat"]?.intValue else { throw DPoPError(.invalidProof, "iat missing") }
        guard abs(Int64(iat) - now) <= window else { throw DPoPError(.invalidProof, "iat is not within \(window) s of now") }
        if let token = request.accessToken {
            guard let ath = claims["ath"]?.stringValue else { throw DPoPError(.invalidProof, "ath missing") }
            guard constantTimeEquals(Array(ath.utf8), Array(Self.ath(token).utf8)) else {
                throw DPoPError(.invalidProof, "ath is not the presented token's hash")
            }
        }
        if let bound = request.boundKey, bound != jkt { throw DPoPError(.invalidProof, "the proof's key is not the one the token is bound to") }
        if let nonces = request.nonces {
            guard let nonce = claims["nonce"]?.stringValue, nonces.accepts(nonce, at: now) else {
                throw DPoPError(.useNonce, "a current DPoP nonce is required")
            }
        }
        return DPoPProof(jkt: jkt, jti: jti, iat: Int64(iat))
    }

    /// The key a proof's `jwk` names, for `algorithm`, and its RFC 7638 thumbprint.
    static func publicKey(_ jwk: JSONValue, for algorithm: DPoPAlgorithm) throws(DPoPError) -> (PublicKey, String) {
        func member(_ name: String) throws(DPoPError) -> (String, [UInt8]) {
            guard let text = jwk[name]?.stringValue, let bytes = Base64URL.decode(text), !bytes.isEmpty else {
                throw DPoPError(.invalidProof, "jwk member \(name) missing or not base64url")
            }
            return (text, bytes)
        }
        let kty = jwk["kty"]?.stringValue
        let crv = jwk["crv"]?.stringValue
        do {
            switch algorithm {
            case .es256:
                guard kty == "EC", crv == "P-256" else { throw DPoPError(.invalidProof, "ES256 needs an EC P-256 jwk") }
                let (x, xb) = try member("x"), (y, yb) = try member("y")
                let key = try PublicKey.ec(curve: .p256, x: xb, y: yb)
                return (key, thumbprint([("crv", "P-256"), ("kty", "EC"), ("x", x), ("y", y)]))
            case .edDSA:
                guard kty == "OKP", crv == "Ed25519" else { throw DPoPError(.invalidProof, "EdDSA needs an OKP Ed25519 jwk") }
                let (x, xb) = try member("x")
                return (try PublicKey.ed25519(xb), thumbprint([("crv", "Ed25519"), ("kty", "OKP"), ("x", x)]))
            case .rs256, .ps256:
                guard kty == "RSA" else { throw DPoPError(.invalidProof, "\(algorithm.rawValue) needs an RSA jwk") }
                let (n, nb) = try member("n"), (e, eb) = try member("e")
                let key = try PublicKey.rsa(modulus: nb, exponent: eb)
                guard case .rsa(let bits) = key.type, bits >= 2048 else { throw DPoPError(.invalidProof, "RSA keys must be 2048 bits or more") }
                return (key, thumbprint([("e", e), ("kty", "RSA"), ("n", n)]))
            }
        } catch let error as DPoPError {
            throw error
        } catch {
            throw DPoPError(.invalidProof, "jwk is not a valid public key")
        }
    }

    /// RFC 7638 §3: SHA-256 of the required members, sorted, without whitespace.
    static func thumbprint(_ required: [(String, String)]) -> String {
        let value = JSONValue.object(required.map { (key: $0.0, value: .string($0.1)) })
        return Base64URL.encode(Digest.sha256(value.canonicalized()))
    }

    /// The thumbprint of a public JWK as a client sends it (`dpop_jkt` is compared with this), or
    /// nil when it is not a public key of an accepted kind.
    public static func thumbprint(jwk: JSONValue) -> String? {
        guard case .object(let members) = jwk, !members.contains(where: { privateMembers.contains($0.key) }) else { return nil }
        let algorithm: DPoPAlgorithm
        switch jwk["kty"]?.stringValue { case "EC": algorithm = .es256; case "OKP": algorithm = .edDSA; case "RSA": algorithm = .rs256; default: return nil }
        return try? publicKey(jwk, for: algorithm).1
    }

    /// §4.3 step 9: `htu` without query and fragment equals one of the origins followed by the
    /// request's path, after RFC 3986's syntax-based normalisation (§6.2.2: scheme and host compared
    /// without case, percent-encoded unreserved characters decoded and other escapes compared in
    /// upper case, dot segments removed) and scheme-based normalisation (§6.2.3: the default port
    /// dropped, an empty path is "/"). `request.path` is the path as sent, still percent-encoded.
    static func targets(_ htu: String, _ request: DPoPRequest) -> Bool {
        let target = htu.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)[0]
            .split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)[0]
        guard let (origin, path) = splitOrigin(String(target)) else { return false }
        guard let given = normalisedPath(path), let requested = normalisedPath(request.path), given == requested else { return false }
        return request.origins.contains { allowed in splitOrigin(allowed).map { $0.0 == origin } ?? false }
    }

    /// RFC 3986 §6.2.2.1–§6.2.2.3 and §6.2.3 on a path: nil when it holds a malformed escape.
    static func normalisedPath(_ path: String) -> String? {
        var bytes: [UInt8] = []
        let utf8 = Array(path.utf8)
        var i = 0
        while i < utf8.count {
            guard utf8[i] == UInt8(ascii: "%") else { bytes.append(utf8[i]); i += 1; continue }
            guard i + 2 < utf8.count, let high = hexDigit(utf8[i + 1]), let low = hexDigit(utf8[i + 2]) else { return nil }
            let byte = high << 4 | low
            if isUnreserved(byte) {
                bytes.append(byte)
            } else {
                let hex = Array("0123456789ABCDEF".utf8)
                bytes += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
            }
            i += 3
        }
        let decoded = String(decoding: bytes, as: UTF8.self)
        return removingDotSegments(decoded.isEmpty ? "/" : decoded)
    }

    /// RFC 3986 §2.3.
    static func isUnreserved(_ b: UInt8) -> Bool {
        (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || (b >= 0x30 && b <= 0x39) || b == 0x2D || b == 0x2E || b == 0x5F || b == 0x7E
    }

    static func hexDigit(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: c - 0x30
        case 0x41...0x46: c - 0x41 + 10
        case 0x61...0x66: c - 0x61 + 10
        default: nil
        }
    }

    /// RFC 3986 §5.2.4, on an absolute path.
    static func removingDotSegments(_ path: String) -> String {
        var output: [Substring] = []
        let segments = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        for (index, segment) in segments.enumerated() {
            let last = index == segments.count - 1
            switch segment {
            case ".":
                if last { output.append("") }
            case "..":
                if !output.isEmpty { output.removeLast() }
                if last { output.append("") }
            default:
                output.append(segment)
            }
        }
        return "/" + output.joined(separator: "/")
    }

    /// `scheme://authority` normalised, and the rest (the path).
    static func splitOrigin(_ uri: String) -> (String, String)? {
        guard let colon = uri.firstIndex(of: ":"), uri[colon...].hasPrefix("://") else { return nil }
        let scheme = uri[..<colon].lowercased()
        guard scheme == "https" || scheme == "http" else { return nil }
        let rest = uri[uri.index(colon, offsetBy: 3)...]
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        var authority = rest[..<slash].lowercased()
        guard !authority.isEmpty, !authority.contains("@") else { return nil }
        if scheme == "https", authority.hasSuffix(":443") { authority.removeLast(4) }
        if scheme == "http", authority.hasSuffix(":80") { authority.removeLast(3) }
        return (scheme + "://" + authority, String(rest[slash...]))
    }
}
