import HTTP
import JSON
import Storage
import WellKnown

extension RouteTable {
    /// Health, readiness, metrics, the OpenAPI document and the association files (the web app: Web/WebRoutes.swift).
    mutating func addOperationsRoutes(_ s: Services) {
        for name in WellKnownService.names {
            add("GET", "/.well-known/\(name)", .anyone, accepting: .any) { _ in
                .json(bytes: try s.wellKnown.file(name), headers: [("Cache-Control", "public, max-age=300")])
            }
        }
        // W3C "A Well-Known URL for Relying Party Passkey Endpoints": public, read by credential
        // managers from any origin, built from the configuration alone (no database).
        let endpoints = PasskeyEndpoints.bytes(webOrigin: s.relyingParty.webOrigin)
        add("GET", "/.well-known/\(PasskeyEndpoints.name)", .anyone, accepting: .any) { _ in
            .json(bytes: endpoints, headers: [("Cache-Control", "public, max-age=300"), ("Access-Control-Allow-Origin", "*")])
        }
        // Never touches the database: a hung primary must not make the process look dead.
        add("GET", "/healthz", .anyone, accepting: .any) { _ in
            .json(bytes: JSONValue.object([("status", "ok"), ("version", .string(LatchkeyBuild.version))]).serialized())
        }
        // 503 with the reason (its class only: the server's message, which may name hosts, goes to the log).
        add("GET", "/readyz", .anyone, accepting: .any) { _ in
            if let step = s.startup.pendingStep { throw ServiceError(.internalError, "not ready: \(step)") }
            if let failure = s.database.readiness() { throw ServiceError(.internalError, "database not ready: \(failure.kind)") }
            return .json(bytes: Array(#"{"status":"ready"}"#.utf8))
        }
        add("GET", "/openapi.json", .anyone, accepting: .any) { _ in
            .json(bytes: OpenAPIDocument.bytes, headers: [("Cache-Control", "public, max-age=300")])
        }
        add("GET", "/metrics", .anyone, accepting: .any) { _ in
            let st = s.database.connectionStats
            let outbox = try? s.database.outbox.depth(now: s.runtime.now())
            return .text(s.metrics.render(pool: (st.open, st.inUse, st.waiting), outbox: outbox,
                                          revocationFeedStale: s.isRevocationFeedStale),
                         contentType: "text/plain; version=0.0.4; charset=utf-8")
        }
    }
}
