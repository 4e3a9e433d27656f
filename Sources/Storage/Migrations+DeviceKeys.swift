extension LatchkeyMigrations {
    /// Device keys and step-up (issue: hardware-bound device keys). Empty until that work lands.
    static let deviceKeys: [(version: Int, name: String, sql: String)] = []
}
