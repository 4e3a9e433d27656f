import HTTP
import Transparency

extension RouteTable {
    /// SPEC "Evidence": the log's checkpoint, key, tiles and entry bundles (C2SP tlog-tiles), and a
    /// receipt with its tlog-proof.
    mutating func addTransparencyRoutes(_ s: Services) {
        let log = s.transparency
        add("GET", "/v1/transparency/checkpoint", .anyone, accepting: .any) { _ in
            // Mutable: a few seconds at most (tlog-tiles "Checkpoints").
            .text(try log.checkpoint(), headers: [("Cache-Control", "public, max-age=1")])
        }
        add("GET", "/v1/transparency/key", .anyone, accepting: .any) { _ in
            .text(try log.verifierKey() + "\n", headers: [("Cache-Control", "public, max-age=60")])
        }
        // tile/<L>/<N>[.p/<W>] and tile/entries/<N>[.p/<W>]: N takes one to three path elements
        // (tile indices below 10^9, every tile of a log below 2.56·10^11 entries).
        let tile: @Sendable (RouteContext) throws -> Response = { ctx in
            let path = String(ctx.request.path.dropFirst("/v1/transparency/".count))
            let parsed: TilePath
            do throws(TransparencyError) { parsed = try TilePath(parsing: path) } catch { throw ServiceError(.notFound, "not a tile path: \(error.reason)") }
            let bytes = try log.tile(parsed)
            // A tile is immutable once served whole (a partial one too: its width fixes its contents).
            return Response(status: 200, headers: [("Content-Type", "application/octet-stream"),
                                                   ("Cache-Control", "public, max-age=31536000, immutable")], body: bytes)
        }
        add("GET", "/v1/transparency/tile/{a:text}/{b:text}", .anyone, accepting: .any, tile)
        add("GET", "/v1/transparency/tile/{a:text}/{b:text}/{c:text}", .anyone, accepting: .any, tile)
        add("GET", "/v1/transparency/tile/{a:text}/{b:text}/{c:text}/{d:text}", .anyone, accepting: .any, tile)
        add("GET", "/v1/transparency/tile/{a:text}/{b:text}/{c:text}/{d:text}/{e:text}", .anyone, accepting: .any, tile)
        add("GET", "/v1/receipts/{id:opaque}", .session, accepting: .any) { ctx in
            // The owner only; another user's receipt and an unknown id are the same 404.
            let found = try log.receipt(id: try ctx.path.text("id"), userId: try ctx.userId, minWitnesses: try Self.minWitnesses(ctx.request))
            return .json(bytes: TransparencyRenderer.receipt(found))
        }
        add("GET", "/admin/v1/receipts/{id:opaque}", .admin, accepting: .any) { ctx in
            _ = try ctx.admin()
            let found = try log.receipt(id: try ctx.path.text("id"), userId: nil, minWitnesses: try Self.minWitnesses(ctx.request))
            return .json(bytes: TransparencyRenderer.receipt(found))
        }
    }

    /// `?minWitnesses=N`: 0…64, default 0.
    static func minWitnesses(_ request: Request) throws(ServiceError) -> Int {
        guard let text = request.queryValue("minWitnesses") else { return 0 }
        guard text.utf8.count <= 2, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let n = Int(text), n <= 64 else {
            throw ServiceError.invalid("minWitnesses is a number of witnesses from 0 to 64")
        }
        return n
    }
}
