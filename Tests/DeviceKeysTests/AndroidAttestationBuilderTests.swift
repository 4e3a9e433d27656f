import Crypto
import DeviceKeys
import JSON
import Testing

/// DER re-encoding for the builders: a node's header is rebuilt from its class, form and number.
enum DERBytes {
    static func length(_ n: Int) -> [UInt8] {
        if n < 0x80 { return [UInt8(n)] }
        var bytes: [UInt8] = []
        var v = n
        while v > 0 { bytes.insert(UInt8(v & 0xFF), at: 0); v >>= 8 }
        return [0x80 | UInt8(bytes.count)] + bytes
    }
    static func tag(_ cls: DERNode.TagClass, constructed: Bool, number: UInt64) -> [UInt8] {
        let head = cls.rawValue << 6 | (constructed ? 0x20 : 0)
        if number < 31 { return [head | UInt8(number)] }
        var groups: [UInt8] = [UInt8(number & 0x7F)]
        var v = number >> 7
        while v > 0 { groups.insert(UInt8(v & 0x7F) | 0x80, at: 0); v >>= 7 }
        return [head | 0x1F] + groups
    }
    static func tlv(_ tag: [UInt8], _ content: [UInt8]) -> [UInt8] { tag + length(content.count) + content }
    static func encode(_ n: DERNode) -> [UInt8] { tlv(tag(n.tagClass, constructed: n.constructed, number: n.tagNumber), Array(n.content)) }
    static func sequence(_ parts: [[UInt8]]) -> [UInt8] { tlv([0x30], parts.flatMap { $0 }) }
    static func rebuild(_ n: DERNode, children: [[UInt8]]) -> [UInt8] {
        tlv(tag(n.tagClass, constructed: true, number: n.tagNumber), children.flatMap { $0 })
    }
    static func explicit(_ number: UInt64, _ inner: [UInt8]) -> [UInt8] { tlv(tag(.contextSpecific, constructed: true, number: number), inner) }
    static func integer(_ v: Int) -> [UInt8] {
        var b: [UInt8] = []
        var x = v
        repeat { b.insert(UInt8(x & 0xFF), at: 0); x >>= 8 } while x > 0
        if b[0] & 0x80 != 0 { b.insert(0, at: 0) }
        return tlv([0x02], b)
    }
    static let ecdsaWithSHA256: [UInt8] = [0x30, 0x0A, 0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x04, 0x03, 0x02]
}

/// Builds an attestation from a real one: the real leaf's TBSCertificate with its key description
/// replaced, re-signed by a test CA whose subject is the leaf's real issuer name. The test CA is
/// the only trust anchor, so the chain check passes and exactly the changed field decides.
struct AttestationBuilder {
    let vector: AndroidVector
    let leaf: [UInt8]
    let caKey = PrivateKey.generateEC(.p256)
    let description: [UInt8]

    init(_ vector: AndroidVector) {
        self.vector = vector
        leaf = vector.chain[0]
        description = vector.certificates[0].extension(AndroidKeyDescription.oid)!.value
    }

    var tbs: [DERNode] { try! (try! DERNode.parse(leaf)).children[0].children }

    /// The KeyDescription's eight members, each as DER.
    var members: [[UInt8]] { try! DERNode.parse(description).children.map(DERBytes.encode) }

    /// hardwareEnforced (7) or softwareEnforced (6) as (tag, DER of the [tag] member) pairs.
    func list(_ index: Int) -> [(tag: UInt64, der: [UInt8])] {
        try! (try! DERNode.parse(members[index])).children.map { ($0.tagNumber, DERBytes.encode($0)) }
    }

    func description(replacing index: Int, with der: [UInt8]) -> [UInt8] {
        var m = members
        m[index] = der
        return DERBytes.sequence(m)
    }

    /// A list with `tag` set to `inner` (added in order when absent), or removed when `inner` is nil.
    func description(list index: Int, tag: UInt64, _ inner: [UInt8]?) -> [UInt8] {
        var items = list(index).filter { $0.tag != tag }
        if let inner { items.append((tag, DERBytes.explicit(tag, inner))); items.sort { $0.tag < $1.tag } }
        return description(replacing: index, with: DERBytes.sequence(items.map(\.der)))
    }

    var caName: [UInt8] { DERBytes.encode(tbs[3]) }   // the leaf's issuer

    func ca(extraExtensions: [[UInt8]] = []) -> Certificate {
        let validity = DERBytes.sequence([DERBytes.tlv([0x17], Array("000101000000Z".utf8)), DERBytes.tlv([0x17], Array("491231235959Z".utf8))])
        let basic = DERBytes.sequence([DERBytes.tlv([0x06], [0x55, 0x1D, 0x13]), [0x01, 0x01, 0xFF],
                                       DERBytes.tlv([0x04], DERBytes.sequence([[0x01, 0x01, 0xFF]]))])
        let usage = DERBytes.sequence([DERBytes.tlv([0x06], [0x55, 0x1D, 0x0F]), [0x01, 0x01, 0xFF], DERBytes.tlv([0x04], [0x03, 0x02, 0x02, 0x04])])
        let tbs = DERBytes.sequence([
            DERBytes.explicit(0, DERBytes.integer(2)), DERBytes.integer(0x7E57), DERBytes.ecdsaWithSHA256, caName, validity, caName,
            caKey.publicKey.spkiDER, DERBytes.explicit(3, DERBytes.sequence([basic, usage] + extraExtensions)),
        ])
        return signed(tbs)
    }

    func signed(_ tbs: [UInt8]) -> Certificate {
        let sig = try! caKey.sign(tbs, algorithm: .ecdsa(.sha256))
        return try! Certificate(der: DERBytes.sequence([tbs, DERBytes.ecdsaWithSHA256, DERBytes.tlv([0x03], [0] + sig)]))
    }

    /// The real leaf re-signed by the test CA, with `extensions` (raw Extension DER) replacing its own.
    func leaf(extensions transform: ([[UInt8]]) -> [[UInt8]]) -> Certificate {
        var fields = tbs.map(DERBytes.encode)
        fields[2] = DERBytes.ecdsaWithSHA256
        let extsNode = try! tbs[7].children[0]
        let exts = try! extsNode.children.map(DERBytes.encode)
        fields[7] = DERBytes.explicit(3, DERBytes.sequence(transform(exts)))
        return signed(DERBytes.sequence(fields))
    }

    static func keyDescriptionExtension(_ value: [UInt8]) -> [UInt8] {
        DERBytes.sequence([DERBytes.tlv([0x06], [0x2B, 0x06, 0x01, 0x04, 0x01, 0xD6, 0x79, 0x02, 0x01, 0x11]), DERBytes.tlv([0x04], value)])
    }

    func leaf(description value: [UInt8]) -> Certificate {
        leaf { exts in
            exts.map { e in
                let isKD = (try? (try? DERNode.parse(e))?.children.first?.oidString) == AndroidKeyDescription.oid
                return isKD ? Self.keyDescriptionExtension(value) : e
            }
        }
    }

    func run(_ leaf: Certificate, ca: Certificate? = nil, requireVerifiedBoot: Bool = false,
             trace: AttestationTrace? = nil) -> Result<AttestedDeviceKey, DeviceKeyError> {
        let ca = ca ?? self.ca()
        var policy = vector.policy(requireVerifiedBoot: requireVerifiedBoot)
        policy.trustAnchors = [ca]
        return vector.run(policy, chain: [leaf, ca], trace: trace)
    }

    /// The names of the checks that failed.
    func failures(_ leaf: Certificate, requireVerifiedBoot: Bool = false) -> [String] {
        let trace = AttestationTrace()
        switch run(leaf, requireVerifiedBoot: requireVerifiedBoot, trace: trace) {
        case .success: return []
        case .failure(let e):
            #expect(e.code == .attestationInvalid, "\(e)")
            return trace.checks.filter { !$0.ok }.map(\.check)
        }
    }
}

@Suite("Android Key Attestation: failing cases built from real bytes")
struct AndroidAttestationBuilderTests {
    static let base = AndroidVector.named("ak-caiman-sdk36-tee_ec_rkp")   // TEE, EC P-256, Verified + locked
    let b = AttestationBuilder(base)

    func expectRefused(_ r: Result<AttestedDeviceKey, DeviceKeyError>, _ label: String) {
        switch r {
        case .success: Issue.record("\(label): verified")
        case .failure(let e): #expect(e.code == .attestationInvalid, "\(label): \(e)")
        }
    }

    // MARK: the real chain, unchanged bytes, a changed input

    @Test("Real chain: wrong challenge, app, digest, key, time, anchors, revocation → attestation_invalid")
    func realChain() {
        let v = Self.base
        func failed(_ policy: DeviceKeyAttestationPolicy, challenge: [UInt8]? = nil, chain: [Certificate]? = nil,
                    publicKey: [UInt8]? = nil) -> [String] {
            let trace = AttestationTrace()
            expectRefused(v.run(policy, challenge: challenge, chain: chain, publicKey: publicKey, trace: trace), "case")
            return trace.checks.filter { !$0.ok }.map(\.check)
        }
        #expect(failed(v.policy(), challenge: v.challenge + [0]) == ["challenge"])
        #expect(failed(v.policy(), challenge: []) == ["challenge"])
        var p = v.policy(); p.androidApps = [AndroidAppIdentity(packageName: "com.example.other", signatureDigests: v.androidApps[0].signatureDigests)]
        #expect(failed(p) == ["app"])
        p.androidApps = [AndroidAppIdentity(packageName: v.androidApps[0].packageName, signatureDigests: [[UInt8](repeating: 0xAB, count: 32)])]
        #expect(failed(p) == ["app"])
        p.androidApps = []
        #expect(failed(p) == ["app"])
        #expect(failed(v.policy(), publicKey: PrivateKey.generateEC(.p256).publicKey.spkiDER) == ["publicKey"])
        #expect(failed(v.policy(at: v.at + 8 * 365 * 86_400)) == ["chain.validity"])    // RKP intermediates long expired, root 2 not yet
        #expect(failed(v.policy(at: v.at + 20 * 365 * 86_400)) == ["chain.validity", "chain.anchor"])   // and no root of that key left
        #expect(failed(v.policy(at: v.at - 10 * 86_400)) == ["chain.validity"])         // before the batch certificate
        p = v.policy(); p.trustAnchors = []
        #expect(failed(p) == ["chain.anchor"])
        p.trustAnchors = DeviceKeyAttestationPolicy.shippedRoots.filter { $0.subject.contains { $0.value == "Key Attestation CA1" } }
        #expect(failed(p) == ["chain.anchor"])
        let certs = v.certificates
        for index in certs.indices {
            p = v.policy()
            p.statusList = try! AttestationStatusList(json: Array(#"{"entries":{"\#(certs[index].serialNumberHex)":{"status":"REVOKED","reason":"KEY_COMPROMISE"}}}"#.utf8))
            #expect(failed(p) == ["chain.revocation"], "revoked certificate \(index)")
        }
        // The chain's copy of the root is trusted by key only while it is a genuine self-signed certificate.
        var tampered = v.chain[certs.count - 1]
        tampered[tampered.count - 1] ^= 0x01
        if let copy = try? Certificate(der: tampered) {
            #expect(failed(v.policy(), chain: Array(certs.dropLast()) + [copy]).contains("chain.anchor"))
        }
        // Cut, reordered and padded chains.
        #expect(failed(v.policy(), chain: [certs[0]]) == ["chain.anchor"])
        #expect(failed(v.policy(), chain: [certs[0]] + certs[2...]).contains("chain.signatures"))
        #expect(failed(v.policy(), chain: certs.reversed()).contains("keyDescription.parse"))
        #expect(!failed(v.policy(), chain: [certs[0], certs[0]] + certs[1...]).isEmpty)
        #expect(!failed(v.policy(), chain: []).isEmpty)
        #expect(!failed(v.policy(), chain: Array(repeating: certs[0], count: 11)).isEmpty)
    }

    @Test("The chain's copy of RSA root 1 anchors by key after it expires; every other certificate must be valid")
    func rootByKey() {
        // gak EC (2018) ends at root 1 (expires 2026-05-24); its intermediates expire 2028-03-18.
        let v = AndroidVector.named("gak-algorithm_ec_securitylevel_tee")
        let after = ISOTime.parse("2027-01-01T00:00:00Z")!
        let trace = AttestationTrace()
        switch v.run(v.policy(at: after), trace: trace) {
        case .success: break
        case .failure(let e): Issue.record("\(e) \(trace.checks.filter { !$0.ok })")
        }
        // With root 1 alone as the anchor (nothing else holds its key), the expired root does not anchor.
        var p = v.policy(at: after)
        p.trustAnchors = DeviceKeyAttestationPolicy.shippedRoots.filter { $0.serialNumberHex == "e8fa196314d2fa18" }
        expectRefused(v.run(p), "root 1 only, after it expired")
        // The software attestation root never anchors anything.
        let soft = AndroidVector.named("ak-marlin-sdk29-tee_rsa_none")
        let t2 = AttestationTrace()
        _ = soft.run(soft.policy(), publicKey: PrivateKey.generateEC(.p256).publicKey.spkiDER, trace: t2)
        #expect(t2.checks.contains { $0.check == "chain.anchor" && !$0.ok })
    }

    // MARK: re-signed leaves: one field changed

    @Test("Re-signed unchanged leaf verifies (the builder itself is sound)")
    func baseline() throws {
        let key = try b.run(b.leaf(description: b.description)).get()
        #expect(key.securityLevel == .tee && key.app == "com.google.android.attestation")
        #expect(throws: Never.self) { try b.run(b.leaf(description: b.description), requireVerifiedBoot: true).get() }
    }

    @Test("One field of the key description changed → exactly that check fails")
    func fields() {
        let enumerated: (Int) -> [UInt8] = { DERBytes.tlv([0x0A], [UInt8($0)]) }
        let cases: [(String, [UInt8], [String])] = [
            ("software attestation level", b.description(replacing: 1, with: enumerated(0)), ["securityLevel"]),
            ("software levels", { var m = b.members; m[1] = enumerated(0); m[3] = enumerated(0); return DERBytes.sequence(m) }(), ["securityLevel"]),
            ("StrongBox attests a TEE key", b.description(replacing: 1, with: enumerated(2)), ["securityLevel"]),
            ("other challenge", b.description(replacing: 4, with: DERBytes.tlv([0x04], Array("not the challenge".utf8))), ["challenge"]),
            ("imported", b.description(list: 7, tag: 702, DERBytes.integer(2)), ["origin"]),
            ("software list says imported", b.description(list: 6, tag: 702, DERBytes.integer(2)), ["origin"]),
            ("no origin", b.description(list: 7, tag: 702, nil), ["origin"]),
            ("verify only", b.description(list: 7, tag: 1, DERBytes.tlv([0x31], DERBytes.integer(3))), ["purpose"]),
            ("no purpose", b.description(list: 7, tag: 1, nil), ["purpose"]),
            ("RSA", b.description(list: 7, tag: 2, DERBytes.integer(1)), ["algorithm"]),
            ("P-384", b.description(list: 7, tag: 10, DERBytes.integer(2)), ["algorithm"]),
            ("no rootOfTrust", b.description(list: 7, tag: 704, nil), ["rootOfTrust"]),
            ("allApplications", b.description(list: 6, tag: 600, [0x05, 0x00]), ["allApplications"]),
            ("no attestationApplicationId", b.description(list: 6, tag: 709, nil), ["app"]),
            ("other package", b.description(list: 6, tag: 709, DERBytes.tlv([0x04], DERBytes.sequence([
                DERBytes.tlv([0x31], DERBytes.sequence([DERBytes.tlv([0x04], Array("com.evil".utf8)), DERBytes.integer(1)])),
                DERBytes.tlv([0x31], DERBytes.tlv([0x04], Self.base.androidApps[0].signatureDigests[0])),
            ]))), ["app"]),
        ]
        for (label, description, expected) in cases {
            #expect(b.failures(b.leaf(description: description)) == expected, "\(label)")
        }
    }

    @Test("Verified boot: an unlocked or unverified device passes only when it is not required")
    func verifiedBoot() throws {
        let rot = try #require(b.list(7).first { $0.tag == 704 })
        let fields = try DERNode.parse(rot.der).children[0].children.map(DERBytes.encode)
        let unlocked = DERBytes.sequence([fields[0], [0x01, 0x01, 0x00]] + fields[2...])
        let unverified = DERBytes.sequence([fields[0], fields[1], [0x0A, 0x01, 0x02]] + fields[3...])
        for (label, r) in [("unlocked", unlocked), ("unverified", unverified)] {
            let leaf = b.leaf(description: b.description(list: 7, tag: 704, r))
            #expect(b.failures(leaf).isEmpty, "\(label)")
            #expect(b.failures(leaf, requireVerifiedBoot: true) == ["verifiedBoot"], "\(label)")
        }
    }

    @Test("Malformed key descriptions are refused at parse, never a crash")
    func malformed() {
        let hw = b.list(7)
        let swapped = { var items = hw.map(\.der); items.swapAt(0, 1); return b.description(replacing: 7, with: DERBytes.sequence(items)) }()
        let duplicated = b.description(replacing: 7, with: DERBytes.sequence([hw[0].der] + hw.map(\.der)))
        let cases: [(String, [UInt8])] = [
            ("truncated", Array(b.description.dropLast(5))),
            ("trailing byte", b.description + [0]),
            ("empty", []),
            ("nine members", DERBytes.sequence(b.members + [DERBytes.integer(1)])),
            ("seven members", DERBytes.sequence(Array(b.members.prefix(7)))),
            ("tags out of order", swapped),
            ("tag repeats", duplicated),
            ("security level 3", b.description(replacing: 1, with: DERBytes.tlv([0x0A], [3]))),
            ("version as OCTET STRING", b.description(replacing: 0, with: DERBytes.tlv([0x04], [1]))),
            ("negative version", b.description(replacing: 0, with: DERBytes.tlv([0x02], [0xFF]))),
            ("non-minimal INTEGER", b.description(replacing: 0, with: DERBytes.tlv([0x02], [0x00, 0x01]))),
            ("huge INTEGER", b.description(replacing: 0, with: DERBytes.tlv([0x02], [0x7F] + [UInt8](repeating: 0xFF, count: 12)))),
            ("garbled attestationApplicationId", b.description(list: 6, tag: 709, DERBytes.tlv([0x04], [0x30, 0x03, 0x02, 0x01]))),
            ("origin as NULL", b.description(list: 7, tag: 702, [0x05, 0x00])),
            ("rootOfTrust as INTEGER", b.description(list: 7, tag: 704, DERBytes.integer(0))),
            ("two values in one tag", b.description(replacing: 7, with: DERBytes.sequence([DERBytes.explicit(1, DERBytes.integer(2) + DERBytes.integer(2))]))),
            ("implicit tag", b.description(replacing: 7, with: DERBytes.sequence([[0x81, 0x01, 0x02]]))),
            ("challenge longer than 128 bytes", b.description(replacing: 4, with: DERBytes.tlv([0x04], [UInt8](repeating: 1, count: 129)))),
        ]
        for (label, description) in cases {
            #expect(b.failures(b.leaf(description: description)) == ["keyDescription.parse"], "\(label)")
        }
        // The extension twice, or also in the issuing certificate.
        let twice = b.leaf { $0 + [AttestationBuilder.keyDescriptionExtension(b.description)] }
        #expect(b.failures(twice) == ["keyDescription.parse"])
        let withoutKD = b.leaf { exts in exts.filter { (try? (try? DERNode.parse($0))?.children.first?.oidString) != AndroidKeyDescription.oid } }
        #expect(b.failures(withoutKD) == ["keyDescription.parse"])
        let ca = b.ca(extraExtensions: [AttestationBuilder.keyDescriptionExtension(b.description)])
        let trace = AttestationTrace()
        expectRefused(b.run(b.leaf(description: b.description), ca: ca, trace: trace), "issuer with a key description")
        #expect(trace.checks.filter { !$0.ok }.map(\.check) == ["keyDescription.onlyInLeaf"])
    }

    @Test("Random corruption of the real leaf and of its key description: refused, never a crash")
    func fuzz() {
        var rng = SplitMix(seed: 0xA77E57)
        let v = Self.base
        var certs = v.certificates
        for _ in 0..<300 {
            var der = v.chain[0]
            for _ in 0..<Int(rng.next() % 4 + 1) { der[Int(rng.next() % UInt64(der.count))] = UInt8(truncatingIfNeeded: rng.next()) }
            if Int(rng.next() % 5) == 0 { der = Array(der.prefix(Int(rng.next() % UInt64(der.count)))) }
            guard der != v.chain[0], let leaf = try? Certificate(der: der) else { continue }
            certs[0] = leaf
            expectRefused(v.run(v.policy(), chain: certs), "corrupted real leaf")
        }
        for _ in 0..<300 {
            var d = b.description
            for _ in 0..<Int(rng.next() % 4 + 1) { d[Int(rng.next() % UInt64(d.count))] = UInt8(truncatingIfNeeded: rng.next()) }
            // A flip may land in a value no check reads (uniqueId, a patch level); only no crash is required.
            _ = b.run(b.leaf(description: d))
            _ = try? AndroidKeyDescription(der: d)
        }
    }
}

struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
