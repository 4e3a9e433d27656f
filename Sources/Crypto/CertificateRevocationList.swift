internal import COpenSSL
#if canImport(Glibc)
import Glibc
#endif

final class X509CRLHandle: @unchecked Sendable {
    let pointer: OpaquePointer
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
    deinit { X509_CRL_free(pointer) }
}

/// A parsed X.509 certificate revocation list (RFC 5280 §5). Immutable after parsing; it says
/// nothing until `RevocationCheck` applies it to a chain whose issuer signed it.
public struct CertificateRevocationList: Sendable {
    let handle: X509CRLHandle
    public let der: [UInt8]

    public init(der: [UInt8]) throws(CryptoError) {
        let crl: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            let crl = d2i_X509_CRL(nil, &cursor, buffer.count)
            // Trailing bytes after the CRL are refused, as for certificates.
            if let crl, cursor != buffer.baseAddress.map({ $0 + buffer.count }) { X509_CRL_free(crl); return nil }
            return crl
        }
        guard let crl else { throw CryptoError.openSSL(.invalidCertificate, "not a DER X.509 CRL") }
        handle = X509CRLHandle(crl)
        self.der = der
    }

    /// The CRLs of a file: one DER CRL, or every `X509 CRL` block of a PEM text, in order.
    public static func parse(_ bytes: [UInt8]) throws(CryptoError) -> [CertificateRevocationList] {
        let text = String(decoding: bytes, as: UTF8.self)
        guard text.contains("-----BEGIN X509 CRL-----") else { return [try CertificateRevocationList(der: bytes)] }
        var out: [CertificateRevocationList] = []
        var body: String? = nil
        for line in text.split(whereSeparator: \.isNewline) {
            let l = String(line.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
            if l == "-----BEGIN X509 CRL-----" { body = ""; continue }
            if l == "-----END X509 CRL-----", let b = body {
                guard let der = Base64.decodeStandard(b) else { throw CryptoError(.invalidCertificate, "bad PEM base64 in CRL") }
                out.append(try CertificateRevocationList(der: der))
                body = nil
                continue
            }
            if body != nil { body! += l }
        }
        guard !out.isEmpty else { throw CryptoError(.invalidCertificate, "no PEM CRL found") }
        return out
    }

    public var issuer: [(oid: String, value: String)] { Certificate.names(X509_CRL_get_issuer(handle.pointer)) }
    /// thisUpdate (RFC 5280 §5.1.2.4), seconds since 1970.
    public var thisUpdate: Int64 { Certificate.epoch(X509_CRL_get0_lastUpdate(handle.pointer)) }
    /// nextUpdate (§5.1.2.5); nil when the CRL has none.
    public var nextUpdate: Int64? { X509_CRL_get0_nextUpdate(handle.pointer).map { Certificate.epoch($0) } }

    /// Whether `certificate` issued this CRL: the same name, and its key made the signature.
    public func isIssued(by certificate: Certificate) -> Bool {
        guard X509_NAME_cmp(X509_CRL_get_issuer(handle.pointer), X509_get_subject_name(certificate.handle.pointer)) == 0,
              let key = try? certificate.publicKey else { return false }
        let ok = X509_CRL_verify(handle.pointer, key.handle.pointer) == 1
        if !ok { CryptoError.clearQueue() }
        return ok
    }

    /// Whether this CRL lists `certificate` (serial and issuer name; RFC 5280 §5.3.3 indirect CRLs are not used).
    public func lists(_ certificate: Certificate) -> Bool {
        var entry: OpaquePointer? = nil
        let found = X509_CRL_get0_by_cert(handle.pointer, &entry, certificate.handle.pointer)
        CryptoError.clearQueue()
        return found == 1
    }

    /// Issues a CRL (for test PKIs and the conformance BLOBs a test builds): signed by `key`, the
    /// private key of `issuer`, listing `revokedSerials` (big-endian serial numbers).
    public static func issue(issuer: Certificate, key: PrivateKey, revokedSerials: [[UInt8]], thisUpdate: Int64,
                             nextUpdate: Int64, hash: HashFunction = .sha256) throws(CryptoError) -> CertificateRevocationList {
        guard let crl = X509_CRL_new() else { throw CryptoError(.internalFailure, "X509_CRL_new") }
        defer { X509_CRL_free(crl) }
        guard X509_CRL_set_version(crl, 1) == 1,
              X509_CRL_set_issuer_name(crl, X509_get_subject_name(issuer.handle.pointer)) == 1 else {
            throw CryptoError.openSSL(.internalFailure, "CRL header")
        }
        try withTime(thisUpdate) { t throws(CryptoError) in
            guard X509_CRL_set1_lastUpdate(crl, t) == 1 else { throw CryptoError.openSSL(.internalFailure, "CRL thisUpdate") }
        }
        try withTime(nextUpdate) { t throws(CryptoError) in
            guard X509_CRL_set1_nextUpdate(crl, t) == 1 else { throw CryptoError.openSSL(.internalFailure, "CRL nextUpdate") }
        }
        for serial in revokedSerials {
            guard let revoked = X509_REVOKED_new() else { throw CryptoError(.internalFailure, "X509_REVOKED_new") }
            let number = try asn1Integer(serial)
            defer { ASN1_INTEGER_free(number) }
            guard X509_REVOKED_set_serialNumber(revoked, number) == 1 else {
                X509_REVOKED_free(revoked); throw CryptoError.openSSL(.internalFailure, "revoked serial")
            }
            try withTime(thisUpdate) { t throws(CryptoError) in
                guard X509_REVOKED_set_revocationDate(revoked, t) == 1 else {
                    X509_REVOKED_free(revoked); throw CryptoError.openSSL(.internalFailure, "revocation date")
                }
            }
            guard X509_CRL_add0_revoked(crl, revoked) == 1 else {  // takes ownership on success
                X509_REVOKED_free(revoked); throw CryptoError.openSSL(.internalFailure, "add revoked")
            }
        }
        _ = X509_CRL_sort(crl)
        guard X509_CRL_sign(crl, key.handle.pointer, hash.md) > 0 else { throw CryptoError.openSSL(.internalFailure, "CRL sign") }
        var out: UnsafeMutablePointer<UInt8>? = nil
        let length = i2d_X509_CRL(crl, &out)
        guard length > 0, let out else { throw CryptoError.openSSL(.internalFailure, "i2d_X509_CRL") }
        defer { shim_OPENSSL_free(out) }
        return try CertificateRevocationList(der: Array(UnsafeBufferPointer(start: out, count: Int(length))))
    }
}

/// RFC 5280 §6.3, offline: every certificate of a validated chain (leaf first, anchor last) is
/// checked against the configured CRLs its issuer signed. A certificate no configured CRL covers
/// passes (revocation is checked "where CRLs are configured"); a covering CRL that is not current
/// at `time` fails closed, because it can no longer say the certificate is good.
public enum RevocationCheck {
    public static func check(chain: [Certificate], crls: [CertificateRevocationList], at time: Int64) throws(CryptoError) {
        guard !crls.isEmpty else { return }
        for (index, certificate) in chain.enumerated() {
            // The issuer is the next certificate; a self-issued anchor is its own issuer.
            let issuer = index + 1 < chain.count ? chain[index + 1] : certificate
            if index + 1 == chain.count, !certificate.isSelfIssued { continue }
            for crl in crls where crl.isIssued(by: issuer) {
                if crl.thisUpdate > time || (crl.nextUpdate.map { $0 < time } ?? false) {
                    throw CryptoError(.chainInvalid, "the CRL of \(issuer.commonName) is not current")
                }
                if crl.lists(certificate) {
                    throw CryptoError(.chainInvalid, "certificate \(certificate.commonName) (serial \(certificate.serialNumberHex)) is revoked")
                }
            }
        }
    }
}

/// An ASN1_TIME for `seconds` since 1970, alive for `body`.
func withTime<E: Error>(_ seconds: Int64, _ body: (UnsafeMutablePointer<ASN1_TIME>) throws(E) -> Void) throws(E) {
    guard let t = ASN1_TIME_set(nil, time_t(seconds)) else { return }
    defer { ASN1_TIME_free(t) }
    try body(t)
}

func asn1Integer(_ bigEndian: [UInt8]) throws(CryptoError) -> UnsafeMutablePointer<ASN1_INTEGER> {
    let bytes = bigEndian.isEmpty ? [0] : bigEndian
    guard let bn = BN_bin2bn(bytes, Int32(bytes.count), nil) else { throw CryptoError(.internalFailure, "BN_bin2bn") }
    defer { BN_free(bn) }
    guard let number = BN_to_ASN1_INTEGER(bn, nil) else { throw CryptoError(.internalFailure, "BN_to_ASN1_INTEGER") }
    return number
}
