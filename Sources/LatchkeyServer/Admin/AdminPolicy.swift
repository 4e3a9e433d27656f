/// The admin API's settings, read once from the configuration: the relying party origins and apps
/// are checked against (an origin must reach the rpId; an app's association files are the rpId's),
/// and whether development mode lets `http://` origins in (SPEC "Admin API").
struct AdminPolicy: Sendable {
    var relyingParty: RelyingParty
    var developmentMode: Bool

    init(_ c: Configuration) {
        relyingParty = RelyingParty(c)
        developmentMode = c.developmentMode
    }
}
