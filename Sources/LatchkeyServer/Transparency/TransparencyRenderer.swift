import JSON

/// A receipt and its proof: `{"receipt":<the stored RFC 8785 document, byte for byte>,"log":<tlog-proof text>|null}`.
/// The document's bytes are spliced in as stored (never parsed and re-written), so the commitment a
/// verifier computes from them is the log's leaf.
enum TransparencyRenderer {
    static func receipt(_ r: TransparencyLog.ReceiptProof) -> [UInt8] {
        var out = Array(#"{"receipt":"#.utf8)
        out += r.document
        out += Array(#","log":"#.utf8)
        if let proof = r.proof { JSONValue.append(string: proof, to: &out) } else { out += Array("null".utf8) }
        out.append(UInt8(ascii: "}"))
        return out
    }
}
