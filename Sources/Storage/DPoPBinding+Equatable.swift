/// A session carries its DPoP binding (`NewSession.dpop`), and sessions compare as values.
extension DPoPBinding: Equatable {
    public static func == (l: DPoPBinding, r: DPoPBinding) -> Bool { l.replay == r.replay && l.jkt == r.jkt }
}
