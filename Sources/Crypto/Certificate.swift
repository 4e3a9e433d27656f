internal import COpenSSL
#if canImport(Glibc)
import Glibc
#endif

final class X509Handle: @unchecked Sendable {
    let pointer: OpaquePointer
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
    deinit { X509_free(pointer) }
}

/// A parsed X.509 certificate. Immutable after parsing.
public struct Certificate: Sendable {
    let handle: X509Handle
    public let der: [UInt8]

    public init(der: [UInt8]) throws(CryptoError) {
        let x509: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            let cert = d2i_X509(nil, &cursor, buffer.count)
            if let cert, cursor != buffer.baseAddress.map({ $0 + buffer.count }) { X509_free(cert); return nil }
            return cert
        }
        guard let x509 else { throw CryptoError.openSSL(.invalidCertificate, "not a DER X.509 certificate") }
        handle = X509Handle(x509)
        self.der = der
    }

    /// Takes ownership of an `X509` (one reference) and records its DER.
    init(taking x509: OpaquePointer) throws(CryptoError) {
        handle = X509Handle(x509)
        var out: UnsafeMutablePointer<UInt8>? = nil
        let length = i2d_X509(x509, &out)
        guard length > 0, let out else { throw CryptoError.openSSL(.invalidCertificate, "i2d_X509") }
        defer { shim_OPENSSL_free(out) }
        der = Array(UnsafeBufferPointer(start: out, count: Int(length)))
    }

    /// Every certificate of a PEM text, in order.
    public static func parsePEM(_ pem: String) throws(CryptoError) -> [Certificate] {
        var out: [Certificate] = []
        var inBlock = false
        var body = ""
        for line in pem.split(whereSeparator: \.isNewline) {
            let l = String(line.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
            if l == "-----BEGIN CERTIFICATE-----" { inBlock = true; body = ""; continue }
            if l == "-----END CERTIFICATE-----" {
                guard let der = Base64.decodeStandard(body) else { throw CryptoError(.invalidCertificate, "bad PEM base64") }
                out.append(try Certificate(der: der))
                inBlock = false
                continue
            }
            if inBlock { body += l }
        }
        guard !out.isEmpty else { throw CryptoError(.invalidCertificate, "no PEM certificate found") }
        return out
    }

    /// The subject's CN, else its whole subject, for messages.
    public var commonName: String {
        let s = subject
        return s.first { $0.oid == "2.5.4.3" }?.value ?? s.map { "\($0.oid)=\($0.value)" }.joined(separator: ",")
    }

    /// Subject and issuer names are equal and the certificate's own key made its signature (a root).
    public var isSelfIssued: Bool {
        guard X509_NAME_cmp(X509_get_subject_name(handle.pointer), X509_get_issuer_name(handle.pointer)) == 0,
              let key = try? publicKey else { return false }
        return isSigned(by: key)
    }

    /// X.509 version number as written in certificates (3 for v3).
    public var version: Int { Int(X509_get_version(handle.pointer)) + 1 }

    public var publicKey: PublicKey {
        get throws(CryptoError) {
            guard let key = X509_get_pubkey(handle.pointer) else { throw CryptoError.openSSL(.invalidKey, "unsupported certificate key") }
            return PublicKey(taking: key)
        }
    }

    /// The serialNumber INTEGER's magnitude, big-endian without leading zeros (RFC 5280 §4.1.2.2:
    /// positive, at most 20 octets; nothing here relies on that).
    public var serialNumber: [UInt8] {
        guard let serial = X509_get0_serialNumber(handle.pointer) else { return [] }
        let length = Int(ASN1_STRING_length(serial))
        let bytes = ASN1_STRING_get0_data(serial).map { Array(UnsafeBufferPointer(start: $0, count: length)) } ?? []
        return Array(bytes.drop(while: { $0 == 0 }))
    }

    /// Lower-case hex of the serial without leading zeros ("0" for zero): the key Google's
    /// attestation status list uses (Java `BigInteger.toString(16)`). A negative serial is prefixed "-".
    public var serialNumberHex: String {
        let digits = "0123456789abcdef".map { $0 }
        var text = ""
        for b in serialNumber { text.append(digits[Int(b >> 4)]); text.append(digits[Int(b & 0x0F)]) }
        let trimmed = String(text.drop(while: { $0 == "0" }))
        let negative = X509_get0_serialNumber(handle.pointer).map { ASN1_STRING_type($0) == V_ASN1_NEG_INTEGER } ?? false
        return (negative ? "-" : "") + (trimmed.isEmpty ? "0" : trimmed)
    }

    /// The SubjectPublicKeyInfo DER exactly as the certificate carries it, also for key types
    /// OpenSSL cannot load (`publicKey` throws for those).
    public var subjectPublicKeyInfoDER: [UInt8] {
        guard let spki = X509_get_X509_PUBKEY(handle.pointer) else { return [] }
        let length = i2d_X509_PUBKEY(spki, nil)
        guard length > 0 else { CryptoError.clearQueue(); return [] }
        var out = [UInt8](repeating: 0, count: Int(length))
        let written = out.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor: UnsafeMutablePointer<UInt8>? = buffer.baseAddress
            return i2d_X509_PUBKEY(spki, &cursor)
        }
        return written == length ? out : []
    }

    /// Whether this certificate's issuer name equals `issuer`'s subject name (RFC 5280 §6.1.3 (a)(4)).
    public func issuerNameMatches(subjectOf issuer: Certificate) -> Bool {
        X509_NAME_cmp(X509_get_issuer_name(handle.pointer), X509_get_subject_name(issuer.handle.pointer)) == 0
    }

    public var notBefore: Int64 { Certificate.epoch(X509_get0_notBefore(handle.pointer)) }
    public var notAfter: Int64 { Certificate.epoch(X509_get0_notAfter(handle.pointer)) }

    static func epoch(_ time: UnsafePointer<ASN1_TIME>?) -> Int64 {
        var tm = Glibc.tm()
        guard let time, ASN1_TIME_to_tm(time, &tm) == 1 else { return 0 }
        return Int64(timegm(&tm))
    }

    /// Subject attributes as (dotted OID, UTF-8 value) in order.
    public var subject: [(oid: String, value: String)] { Certificate.names(X509_get_subject_name(handle.pointer)) }
    public var issuer: [(oid: String, value: String)] { Certificate.names(X509_get_issuer_name(handle.pointer)) }

    static func names(_ name: OpaquePointer?) -> [(oid: String, value: String)] {
        guard let name else { return [] }
        var out: [(oid: String, value: String)] = []
        for i in 0..<X509_NAME_entry_count(name) {
            guard let entry = X509_NAME_get_entry(name, i) else { continue }
            let oid = Certificate.oidText(X509_NAME_ENTRY_get_object(entry))
            var utf8: UnsafeMutablePointer<UInt8>? = nil
            let length = ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(entry))
            var value = ""
            if length >= 0, let utf8 {
                value = String(decoding: UnsafeBufferPointer(start: utf8, count: Int(length)), as: UTF8.self)
                shim_OPENSSL_free(utf8)
            }
            out.append((oid: oid, value: value))
        }
        return out
    }

    static func oidText(_ object: OpaquePointer?) -> String {
        var buffer = [CChar](repeating: 0, count: 128)
        let n = OBJ_obj2txt(&buffer, Int32(buffer.count), object, 1)
        guard n > 0 else { return "" }
        return String(decoding: buffer.prefix(Int(min(n, 127))).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    public struct Extension: Sendable {
        public let oid: String
        public let critical: Bool
        /// The DER inside extnValue's OCTET STRING.
        public let value: [UInt8]
    }

    public var extensions: [Extension] {
        var out: [Extension] = []
        for i in 0..<X509_get_ext_count(handle.pointer) {
            guard let ext = X509_get_ext(handle.pointer, i) else { continue }
            out.append(Certificate.makeExtension(ext, oid: Certificate.oidText(X509_EXTENSION_get_object(ext))))
        }
        return out
    }

    /// The first extension with this dotted OID; only that one's value is copied out.
    public func `extension`(_ oid: String) -> Extension? {
        for i in 0..<X509_get_ext_count(handle.pointer) {
            guard let ext = X509_get_ext(handle.pointer, i) else { continue }
            if Certificate.oidText(X509_EXTENSION_get_object(ext)) == oid { return Certificate.makeExtension(ext, oid: oid) }
        }
        return nil
    }

    private static func makeExtension(_ ext: OpaquePointer, oid: String) -> Extension {
        let data = X509_EXTENSION_get_data(ext)
        let length = Int(ASN1_STRING_length(data))
        let bytes = ASN1_STRING_get0_data(data).map { Array(UnsafeBufferPointer(start: $0, count: length)) } ?? []
        return Extension(oid: oid, critical: X509_EXTENSION_get_critical(ext) == 1, value: bytes)
    }

    /// basicConstraints cA (RFC 5280 §4.2.1.9); false when the extension is absent.
    public var isCA: Bool {
        guard let ext = self.extension("2.5.29.19"), let seq = try? DERNode.parse(ext.value),
              let first = try? seq.children.first, first.isUniversal(DERNode.boolean) else { return false }
        return (try? first.boolValue) ?? false
    }

    /// extKeyUsage OIDs (RFC 5280 §4.2.1.12).
    public var extendedKeyUsage: [String] {
        guard let ext = self.extension("2.5.29.37"), let seq = try? DERNode.parse(ext.value),
              let items = try? seq.children else { return [] }
        return items.compactMap { try? $0.oidString }
    }

    /// The dNSName entries of subjectAltName (RFC 5280 §4.2.1.6: GeneralName `[2] IMPLICIT IA5String`),
    /// in order; empty when there is no such extension or it names no DNS name. A subjectAltName
    /// that is not a well-formed SEQUENCE OF GeneralName, or a dNSName that is not ASCII, throws:
    /// a name check must not pass over a name it could not read.
    public var subjectAltNameDNSNames: [String] {
        get throws(CryptoError) {
            guard let ext = self.extension("2.5.29.17") else { return [] }
            let names = try DERNode.parse(ext.value)
            guard names.isUniversal(DERNode.sequence), names.constructed else {
                throw CryptoError(.invalidCertificate, "subjectAltName is not a SEQUENCE")
            }
            var out: [String] = []
            for name in try names.children where name.isContext(2) {
                guard !name.constructed, name.content.allSatisfy({ $0 < 0x80 }) else {
                    throw CryptoError(.invalidCertificate, "subjectAltName dNSName is not an IA5String")
                }
                out.append(String(decoding: name.content, as: UTF8.self))
            }
            return out
        }
    }

    /// Whether `issuer`'s key made this certificate's signature.
    public func isSigned(by issuerKey: PublicKey) -> Bool {
        let ok = X509_verify(handle.pointer, issuerKey.handle.pointer) == 1
        if !ok { CryptoError.clearQueue() }
        return ok
    }
}

/// Validates a certificate path to configured trust anchors at a given time (WebAuthn L3 §7.1
/// step 23: trustworthiness of the attestation). Anchors may be roots or intermediates.
public enum CertificatePath {
    /// Validates `leaf` through `intermediates` to one of `anchors` at `time`, then applies `crls`
    /// (`RevocationCheck`) to the chain OpenSSL built. Returns that chain, leaf first, anchor last.
    @discardableResult
    public static func validate(leaf: Certificate, intermediates: [Certificate], anchors: [Certificate],
                                at time: Int64, crls: [CertificateRevocationList] = []) throws(CryptoError) -> [Certificate] {
        guard !anchors.isEmpty else { throw CryptoError(.chainInvalid, "no trust anchors configured") }
        guard let store = X509_STORE_new() else { throw CryptoError(.internalFailure, "X509_STORE_new") }
        defer { X509_STORE_free(store) }
        for anchor in anchors { X509_STORE_add_cert(store, anchor.handle.pointer) }
        guard let untrusted = shim_sk_X509_new_null() else { throw CryptoError(.internalFailure, "stack") }
        defer { shim_sk_X509_free(untrusted) }  // does not free the certificates, which we own
        for cert in intermediates { _ = shim_sk_X509_push(untrusted, cert.handle.pointer) }
        guard let ctx = X509_STORE_CTX_new() else { throw CryptoError(.internalFailure, "X509_STORE_CTX_new") }
        defer { X509_STORE_CTX_free(ctx) }
        guard X509_STORE_CTX_init(ctx, store, leaf.handle.pointer, untrusted) == 1 else {
            throw CryptoError.openSSL(.internalFailure, "X509_STORE_CTX_init")
        }
        let param = X509_STORE_CTX_get0_param(ctx)
        X509_VERIFY_PARAM_set_time(param, time_t(time))
        X509_VERIFY_PARAM_set_flags(param, UInt(X509_V_FLAG_PARTIAL_CHAIN))
        // Attestation certificates carry no TLS purposes; only the path and signatures matter.
        X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_ANY)
        // Keep the leaf alive for the context's lifetime (held by `leaf` above).
        let result = X509_verify_cert(ctx)
        withExtendedLifetime((leaf, intermediates, anchors)) {}
        if result != 1 {
            let code = X509_STORE_CTX_get_error(ctx)
            let text = X509_verify_cert_error_string(Int(code)).map { String(cString: $0) } ?? "unknown"
            CryptoError.clearQueue()
            throw CryptoError(.chainInvalid, "certificate path invalid: \(text)")
        }
        // The chain as built (each certificate up-referenced by get1), wrapped so each is owned once.
        var chain: [Certificate] = []
        if let built = X509_STORE_CTX_get1_chain(ctx) {
            defer { shim_sk_X509_free(built) }
            for i in 0..<shim_sk_X509_num(built) {
                guard let x = shim_sk_X509_value(built, i) else { continue }
                chain.append(try Certificate(taking: x))
            }
        }
        try RevocationCheck.check(chain: chain, crls: crls, at: time)
        return chain
    }
}
