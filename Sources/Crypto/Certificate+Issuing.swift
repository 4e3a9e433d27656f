internal import COpenSSL

/// What a new certificate says. Used by test PKIs (the software authenticator's attestation
/// chains, the metadata BLOBs tests sign); nothing on a verification path issues certificates.
public struct CertificateTemplate: Sendable {
    /// Subject attributes in order, as (dotted OID or short name such as "CN", value).
    public var subject: [(oid: String, value: String)]
    public var serial: [UInt8]
    public var notBefore: Int64
    public var notAfter: Int64
    public var isCA: Bool
    /// More extensions: `value` is the DER that goes inside extnValue's OCTET STRING.
    public var extensions: [Certificate.Extension]

    public init(subject: [(oid: String, value: String)], serial: [UInt8], notBefore: Int64, notAfter: Int64, isCA: Bool,
                extensions: [Certificate.Extension] = []) {
        self.subject = subject
        self.serial = serial
        self.notBefore = notBefore
        self.notAfter = notAfter
        self.isCA = isCA
        self.extensions = extensions
    }
}

extension Certificate.Extension {
    public init(oid: String, critical: Bool, derValue: [UInt8]) {
        self.init(oid: oid, critical: critical, value: derValue)
    }
}

extension Certificate {
    /// Issues an X.509 v3 certificate for `publicKey`, signed by `signingKey` in the name of
    /// `issuer` (nil: self-signed, `publicKey` must then be `signingKey`'s). CA certificates get
    /// basicConstraints cA and keyCertSign/cRLSign; others basicConstraints cA=false.
    public static func issue(_ template: CertificateTemplate, publicKey: PublicKey, issuer: Certificate?,
                             signingKey: PrivateKey, hash: HashFunction? = .sha256) throws(CryptoError) -> Certificate {
        guard let x509 = X509_new() else { throw CryptoError(.internalFailure, "X509_new") }
        var owned = true
        defer { if owned { X509_free(x509) } }
        func check(_ ok: Bool, _ what: String) throws(CryptoError) { if !ok { throw CryptoError.openSSL(.internalFailure, what) } }
        try check(X509_set_version(x509, 2) == 1, "version")
        let serial = try asn1Integer(template.serial)
        defer { ASN1_INTEGER_free(serial) }
        try check(X509_set_serialNumber(x509, serial) == 1, "serial")
        guard let name = X509_NAME_new() else { throw CryptoError(.internalFailure, "X509_NAME_new") }
        defer { X509_NAME_free(name) }
        for (oid, value) in template.subject {
            let bytes = Array(value.utf8)
            try check(X509_NAME_add_entry_by_txt(name, oid, MBSTRING_UTF8, bytes, Int32(bytes.count), -1, 0) == 1, "subject \(oid)")
        }
        try check(X509_set_subject_name(x509, name) == 1, "subject")
        try check(X509_set_issuer_name(x509, issuer.map { X509_get_subject_name($0.handle.pointer) } ?? name) == 1, "issuer")
        try check(ASN1_TIME_set(X509_getm_notBefore(x509), time_t(template.notBefore)) != nil, "notBefore")
        try check(ASN1_TIME_set(X509_getm_notAfter(x509), time_t(template.notAfter)) != nil, "notAfter")
        try check(X509_set_pubkey(x509, publicKey.handle.pointer) == 1, "public key")

        var ctx = X509V3_CTX()
        X509V3_set_ctx(&ctx, issuer?.handle.pointer ?? x509, x509, nil, nil, 0)
        var standard: [(Int32, String)] = [(NID_subject_key_identifier, "hash")]
        if template.isCA {
            standard += [(NID_basic_constraints, "critical,CA:TRUE"), (NID_key_usage, "critical,keyCertSign,cRLSign")]
        } else {
            standard += [(NID_basic_constraints, "critical,CA:FALSE")]
        }
        if issuer != nil { standard.append((NID_authority_key_identifier, "keyid:always")) }
        for (nid, value) in standard {
            guard let ext = X509V3_EXT_conf_nid(nil, &ctx, nid, value) else { throw CryptoError.openSSL(.internalFailure, "extension \(nid)") }
            defer { X509_EXTENSION_free(ext) }
            try check(X509_add_ext(x509, ext, -1) == 1, "add extension")
        }
        for e in template.extensions {
            guard let object = OBJ_txt2obj(e.oid, 1) else { throw CryptoError.openSSL(.internalFailure, "OID \(e.oid)") }
            defer { ASN1_OBJECT_free(object) }
            guard let octets = ASN1_OCTET_STRING_new() else { throw CryptoError(.internalFailure, "ASN1_OCTET_STRING_new") }
            defer { ASN1_OCTET_STRING_free(octets) }
            try check(ASN1_OCTET_STRING_set(octets, e.value, Int32(e.value.count)) == 1, "extension value")
            guard let ext = X509_EXTENSION_create_by_OBJ(nil, object, e.critical ? 1 : 0, octets) else {
                throw CryptoError.openSSL(.internalFailure, "extension \(e.oid)")
            }
            defer { X509_EXTENSION_free(ext) }
            try check(X509_add_ext(x509, ext, -1) == 1, "add extension")
        }
        try check(X509_sign(x509, signingKey.handle.pointer, hash?.md) > 0, "sign")
        owned = false
        return try Certificate(taking: x509)
    }

    /// PEM text of this certificate.
    public var pem: String { PEM.encode(der, label: "CERTIFICATE") }
}
