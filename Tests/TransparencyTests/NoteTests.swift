import Crypto
import Testing
import Transparency

@Suite struct NoteTests {
    // signed-note v1.0.0, "Example".
    static let vkey = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"
    static let note = "This is an example message.\n\n\u{2014} example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n"

    @Test func theSpecExampleVerifies() throws {
        let key = try VerifierKey(parsing: Self.vkey)
        #expect(key.name == "example.com/foo")
        #expect(key.keyID == 0x530d903a)
        #expect(key.description == Self.vkey)
        let note = try SignedNote(parsing: Self.note)
        #expect(note.text == "This is an example message.\n")
        #expect(note.serialized == Self.note)
        let good = try note.verified(by: [try Ed25519NoteVerifier(key)])
        #expect(good.count == 1)
    }

    @Test func tamperedOrUnknownSignaturesAreRefused() throws {
        let key = try VerifierKey(parsing: Self.vkey)
        let changed = try SignedNote(parsing: Self.note.replacingFirst("example message", "exemplary message"))
        #expect(throws: TransparencyError.self) { try changed.verified(by: [try Ed25519NoteVerifier(key)]) }
        // Same name, another key: its ID differs, so the signature is ignored and none is known.
        let other = try Ed25519NoteSigner(name: "example.com/foo", privateKey: .generateEd25519())
        #expect(throws: TransparencyError("no signature by a known key")) {
            try SignedNote(parsing: Self.note).verified(by: [try Ed25519NoteVerifier(other.verifierKey)])
        }
        // A wrong key ID in the vkey is refused.
        #expect(throws: TransparencyError.self) { try VerifierKey(parsing: "example.com/foo+530d903b+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k") }
        for bad in ["no blank line\n\u{2014} a AAAAAA==\n", "text\n\n", "text\n\n\u{2014} a b c\n", "te\u{7}xt\n\n\u{2014} a AAAAAA==\n",
                    "text\n\n\u{2014} a AAA=\n", "text\n\n\u{2014} a AAAAAA==", "text\n\n- a AAAAAA==\n"] {
            #expect(throws: TransparencyError.self, "\(bad)") { try SignedNote(parsing: bad) }
        }
    }

    @Test func verifierKeysWhoseBase64HoldsAPlus() throws {
        // The key part is base64, whose alphabet has `+`: only the first two `+` separate the parts.
        var seen = 0
        for _ in 0..<400 where seen < 5 {
            let key = VerifierKey(name: "example.com/log", type: .ed25519, publicKey: PrivateKey.generateEd25519().publicKey.rawEd25519!)
            guard key.description.split(separator: "+").count > 3 else { continue }
            seen += 1
            #expect(try VerifierKey(parsing: key.description) == key)
        }
        #expect(seen > 0)
    }

    @Test func signsAndCosigns() throws {
        let log = try Ed25519NoteSigner(name: "example.com/log", privateKey: .generateEd25519())
        let checkpoint = Checkpoint(origin: "example.com/log", size: 3, root: Digest.sha256([1]))
        let witnessKey = PrivateKey.generateEd25519()
        let witness = VerifierKey(name: "witness.example/w1", type: .cosignatureV1, publicKey: witnessKey.publicKey.rawEd25519!)
        let cosignature = try CosignatureV1.sign(text: checkpoint.text, timestamp: 1679315147, name: witness.name, privateKey: witnessKey)
        #expect(cosignature.signature.count == 72)
        #expect(CosignatureV1.timestamp(cosignature.signature) == 1679315147)
        let note = SignedNote(text: checkpoint.text, signatures: [try log.sign(text: checkpoint.text), cosignature])
        let reparsed = try SignedNote(parsing: note.serialized)
        #expect(reparsed == note)
        let opened = try Checkpoint.open(note.serialized, logKey: log.verifierKey, witnesses: [witness])
        #expect(opened.checkpoint == checkpoint)
        #expect(opened.cosigners == ["witness.example/w1"])
        #expect(try VerifierKey(parsing: witness.description) == witness)
        // A cosignature verifies over the cosignature/v1 message only, not the bare text.
        let wrongMessage = SignedNote.Signature(name: witness.name, keyID: witness.keyID,
                                                signature: Array(cosignature.signature[..<8]) + (try witnessKey.sign(Array(checkpoint.text.utf8), algorithm: .ed25519)))
        let forged = SignedNote(text: checkpoint.text, signatures: [try log.sign(text: checkpoint.text), wrongMessage])
        #expect(throws: TransparencyError.self) { try Checkpoint.open(forged.serialized, logKey: log.verifierKey, witnesses: [witness]) }
        // The origin is the log key's name.
        let stranger = try Ed25519NoteSigner(name: "example.com/other", privateKey: log.privateKey)
        let misnamed = SignedNote(text: checkpoint.text, signatures: [try stranger.sign(text: checkpoint.text)])
        #expect(throws: TransparencyError.self) { try Checkpoint.open(misnamed.serialized, logKey: stranger.verifierKey) }
    }

    @Test func checkpointText() throws {
        let c = try Checkpoint(text: "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n")
        #expect(c.origin == "example.com/behind-the-sofa")
        #expect(c.size == 20852163)
        #expect(c.text == "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n")
        for bad in ["o\n01\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n", "o\n1\nCsUY\n", "o\n1\n", "o\n-1\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n",
                    "o\n1\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n\n"] {
            #expect(throws: TransparencyError.self, "\(bad)") { try Checkpoint(text: bad) }
        }
    }
}

extension String {
    func replacingFirst(_ a: String, _ b: String) -> String {
        guard let r = self.firstRange(of: a) else { return self }
        return String(self[..<r.lowerBound]) + b + String(self[r.upperBound...])
    }
}
