@testable import PostgreSQL
import PostgreSQLTesting

/// The database the PostgreSQL wrapper's integration tests use (`TestCluster`).
enum TestDatabase {
    static func url() throws -> String { try TestCluster.url() }

    static func connect() throws -> PostgresConnection { try PostgresConnection(url: url()) }

    /// A fresh lower-case identifier for tables created by one test (tests run in parallel).
    static func uniqueName(_ prefix: String) -> String { TestCluster.uniqueName(prefix) }

    /// `url` with an extra query parameter (e.g. `application_name`).
    static func url(adding parameter: String) throws -> String {
        let base = try url()
        return base + (base.contains("?") ? "&" : "?") + parameter
    }
}
