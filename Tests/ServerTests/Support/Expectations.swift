import Testing

/// `reply` is an RFC 9457 problem with exactly this status and SPEC `code`.
func expectProblem(_ reply: Reply, _ status: Int, _ code: String, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(reply.status == status && reply.code == code && reply.isProblem, "\(reply)", sourceLocation: sourceLocation)
}
