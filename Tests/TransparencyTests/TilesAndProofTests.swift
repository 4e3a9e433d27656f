import Crypto
import Testing
import Transparency

@Suite struct TilesAndProofTests {
    @Test func tilePathsRoundTrip() throws {
        #expect(TilePath.encode(index: 1234067) == "x001/x234/067")
        #expect(TilePath.encode(index: 5) == "005")
        #expect(TilePath.encode(index: 1000) == "x001/000")
        let cases: [(String, TilePath)] = [
            ("tile/0/005", TilePath(level: 0, index: 5)),
            ("tile/1/x001/x234/067.p/17", TilePath(level: 1, index: 1234067, width: 17)),
            ("tile/entries/000.p/255", TilePath(level: nil, index: 0, width: 255)),
            ("tile/63/x001/000", TilePath(level: 63, index: 1000)),
        ]
        for (text, tile) in cases {
            #expect(try TilePath(parsing: text) == tile)
            #expect(tile.description == text)
        }
        for bad in ["tile/0/5", "tile/00/005", "tile/64/000", "tile/0/x000/005", "tile/0/001/002", "tile/0/005.p/0", "tile/0/005.p/256",
                    "tile/0/005.p/01", "tile/0/005.p", "tile/0/", "tile/entries/", "tile/x/000", "tiles/0/000", "tile/0/x018/x446/x744/x073/x709/x551/616",
                    "tile/0/00a", "tile/0/x01/000", "tile/-1/000", "tile/0/005/"] {
            #expect(throws: TransparencyError.self, "\(bad)") { try TilePath(parsing: bad) }
        }
        // The text's example: a tree of 70,000 holds 273 full level-0 tiles and a partial of 112, …
        #expect(TilePath(level: 0, index: 272).isContained(inTreeOf: 70000))
        #expect(!TilePath(level: 0, index: 273).isContained(inTreeOf: 70000))
        #expect(TilePath(level: 0, index: 273, width: 112).isContained(inTreeOf: 70000))
        #expect(!TilePath(level: 0, index: 273, width: 113).isContained(inTreeOf: 70000))
        #expect(TilePath(level: 1, index: 0).isContained(inTreeOf: 70000))
        #expect(TilePath(level: 1, index: 1, width: 17).isContained(inTreeOf: 70000))
        #expect(TilePath(level: 2, index: 0, width: 1).isContained(inTreeOf: 70000))
        #expect(!TilePath(level: 2, index: 0, width: 2).isContained(inTreeOf: 70000))
        #expect(!TilePath(level: 63, index: UInt64.max / 1000).isContained(inTreeOf: UInt64.max))
    }

    @Test func entryBundles() throws {
        let entries = (0..<5).map { _ in SecureRandom.bytes(32) }
        let bundle = EntryBundle.encode(entries)
        #expect(bundle.count == 5 * 34)
        #expect(Array(bundle[0..<2]) == [0, 32])
        #expect(try EntryBundle.decode(bundle) == entries)
        #expect(throws: TransparencyError.self) { try EntryBundle.decode(Array(bundle.dropLast())) }
    }

    static func makeLog(size: Int) throws -> (Ed25519NoteSigner, [[UInt8]], CompleteSubtrees, Checkpoint) {
        let signer = try Ed25519NoteSigner(name: "rp.example/latchkey/receipts", privateKey: .generateEd25519())
        let commitments = (0..<size).map { _ in SecureRandom.bytes(32) }
        let tree = CompleteSubtrees(leafHashes: commitments.map(MerkleTree.leafHash))
        let checkpoint = Checkpoint(origin: signer.name, size: UInt64(size), root: MerkleTree.root(size: UInt64(size)) { tree.nodes[$0]! })
        return (signer, commitments, tree, checkpoint)
    }

    @Test func proofsVerifyWithNamedChecks() throws {
        let (signer, commitments, tree, checkpoint) = try Self.makeLog(size: 13)
        let witnessKey = PrivateKey.generateEd25519()
        let witness = VerifierKey(name: "witness.example", type: .cosignatureV1, publicKey: witnessKey.publicKey.rawEd25519!)
        let note = SignedNote(text: checkpoint.text, signatures: [try signer.sign(text: checkpoint.text),
                                                                  try CosignatureV1.sign(text: checkpoint.text, timestamp: 1, name: witness.name, privateKey: witnessKey)])
        let proof = TlogProof(index: 9, inclusion: try MerkleTree.inclusionProof(index: 9, size: 13) { tree.nodes[$0]! }, checkpoint: note.serialized)
        #expect(try TlogProof(parsing: proof.text) == proof)
        #expect(proof.text.hasPrefix("c2sp.org/tlog-proof@v1\nindex 9\n"))
        let logKey = signer.verifierKey.description
        let good = TlogProofVerifier.verify(proofText: proof.text, commitment: commitments[9], logKey: logKey, witnessKeys: [witness.description], minWitnesses: 1)
        #expect(good.map(\.name) == ["proof-format", "log-signature", "cosignatures", "inclusion"])
        #expect(good.allSatisfy { $0.passed }, "\(good)")

        // Another commitment, another log key, a missing witness, a tampered proof: each named.
        let other = TlogProofVerifier.verify(proofText: proof.text, commitment: commitments[8], logKey: logKey)
        #expect(other.last == TransparencyCheck(name: "inclusion", passed: false, detail: other.last!.detail))
        #expect(!other.last!.passed)
        let stranger = try Ed25519NoteSigner(name: signer.name, privateKey: .generateEd25519())
        let wrongLog = TlogProofVerifier.verify(proofText: proof.text, commitment: commitments[9], logKey: stranger.verifierKey.description)
        #expect(wrongLog.last?.name == "log-signature" && wrongLog.last?.passed == false)
        let noWitness = TlogProofVerifier.verify(proofText: proof.text, commitment: commitments[9], logKey: logKey, witnessKeys: [], minWitnesses: 1)
        #expect(noWitness.first { $0.name == "cosignatures" }?.passed == false)
        let tampered = proof.text.replacingFirst("index 9", "index 10")
        #expect(TlogProofVerifier.verify(proofText: tampered, commitment: commitments[9], logKey: logKey).last?.passed == false)
        #expect(TlogProofVerifier.verify(proofText: "garbage", commitment: commitments[9], logKey: logKey) == [
            TransparencyCheck(name: "proof-format", passed: false, detail: "a tlog proof starts with c2sp.org/tlog-proof@v1")])
        // A witness key given as the log key is refused by its type.
        #expect(TlogProofVerifier.verify(proofText: proof.text, commitment: commitments[9], logKey: witness.description).last?.passed == false)
    }

    @Test func addCheckpointBodies() throws {
        let (signer, _, tree, checkpoint) = try Self.makeLog(size: 10)
        let consistency = try MerkleTree.consistencyProof(oldSize: 6, size: 10) { tree.nodes[$0]! }
        let note = SignedNote(text: checkpoint.text, signatures: [try signer.sign(text: checkpoint.text)])
        let body = AddCheckpoint.body(oldSize: 6, consistency: consistency, checkpoint: note.serialized)
        #expect(body.hasPrefix("old 6\n"))
        #expect(body.hasSuffix("\n\n" + note.serialized))
        #expect(AddCheckpoint.conflictSize(Array("42\n".utf8)) == 42)
        #expect(AddCheckpoint.conflictSize(Array("042\n".utf8)) == nil)
        let witnessKey = PrivateKey.generateEd25519()
        let witness = VerifierKey(name: "w.example", type: .cosignatureV1, publicKey: witnessKey.publicKey.rawEd25519!)
        let line = try CosignatureV1.sign(text: checkpoint.text, timestamp: 7, name: witness.name, privateKey: witnessKey).line
        let unknown = try CosignatureV1.sign(text: checkpoint.text, timestamp: 7, name: "other.example", privateKey: .generateEd25519()).line
        #expect(try AddCheckpoint.cosignatures(Array((unknown + line).utf8), checkpointText: checkpoint.text, witness: witness).count == 1)
        #expect(throws: TransparencyError.self) { try AddCheckpoint.cosignatures(Array(unknown.utf8), checkpointText: checkpoint.text, witness: witness) }
    }
}
