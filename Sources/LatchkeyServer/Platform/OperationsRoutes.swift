import HTTP
import JSON
import Storage

extension RouteTable {
    /// Health, readiness, metrics and the association files (the web app: Web/WebRoutes.swift).
    mutating func addOperationsRoutes(_ s: Services) {
        for name in WellKnownService.names {
            add("GET", "/.well-known/\(name)", .anyone, accepting: .any) { _ in try s.wellKnown.response(for: name) }
        }
        add("GET", "/healthz", .anyone, accepting: .any) { _ in
            .json(bytes: JSONValue.object([("status", "ok"), ("version", .string(LatchkeyBuild.version))]).serialized())
        }
        add("GET", "/readyz", .anyone, accepting: .any) { _ in
            guard s.database.ping() else { throw ServiceError(.internalError, "database unreachable") }
            return .json(bytes: Array(#"{"status":"ready"}"#.utf8))
        }
        add("GET", "/metrics", .anyone, accepting: .any) { _ in
            let st = s.database.connectionStats
            let outbox = try? s.database.outbox.depth(now: s.runtime.now())
            return .text(s.metrics.render(pool: (st.open, st.inUse, st.waiting), outbox: outbox),
                         contentType: "text/plain; version=0.0.4; charset=utf-8")
        }
    }
}
