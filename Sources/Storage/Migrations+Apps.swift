extension LatchkeyMigrations {
    /// Associated native apps (issue: native-app association). Empty until that work lands.
    static let apps: [(version: Int, name: String, sql: String)] = []
}
