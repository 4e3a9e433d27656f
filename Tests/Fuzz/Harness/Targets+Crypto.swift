import Crypto

extension FuzzTargets {
    static let cryptoTargets: [FuzzTarget] = [
        FuzzTarget("x509", "Certificate(der:) and every accessor over OpenSSL, then the DERNode tree of the same bytes") { bytes in
            walkDER(bytes)
            guard let cert = try? Certificate(der: bytes) else { return }
            _ = cert.version
            _ = cert.notBefore
            _ = cert.notAfter
            _ = cert.subject
            _ = cert.issuer
            for ext in cert.extensions { _ = cert.extension(ext.oid); walkDER(ext.value) }
            _ = cert.isCA
            _ = cert.extendedKeyUsage
            if let key = try? cert.publicKey {
                _ = cert.isSigned(by: key)
                _ = key.spkiDER
                _ = key.x963Point
                _ = key.rsaComponents
                _ = key.rawEd25519
                _ = try? CertificatePath.validate(leaf: cert, intermediates: [], anchors: [cert], at: 1_700_000_000)
            }
        },
    ]

    /// Every node of a DER tree (bounded by DERNode.maxDepth), reading each primitive's value.
    static func walkDER(_ bytes: [UInt8]) {
        guard let root = try? DERNode.parse(bytes) else { return }
        var stack = [(root, 0)]
        var visited = 0
        while let (node, depth) = stack.popLast(), visited < 10_000 {
            visited += 1
            if node.constructed {
                guard depth < DERNode.maxDepth, let children = try? node.children else { continue }
                stack += children.map { ($0, depth + 1) }
            } else if node.isUniversal(DERNode.integer) || node.isUniversal(DERNode.enumerated) {
                _ = try? node.intValue
            } else if node.isUniversal(DERNode.oid) {
                _ = try? node.oidString
            } else if node.isUniversal(DERNode.boolean) {
                _ = try? node.boolValue
            }
        }
    }
}
