import Crypto
import DeviceKeys
import HTTP
import JSON

extension RouteTable {
    /// SPEC "Portability" over the admin API: `GET /admin/v1/export` (the admin key, or an admin
    /// user's step-up for `{"type":"latchkey.admin.export"}`) and `POST /admin/v1/import` (an admin
    /// user's step-up for `{"type":"latchkey.admin.import","sha256"}`, never the admin key), both
    /// `application/jsonl`.
    mutating func addPortabilityRoutes(_ s: Services) {
        add("GET", "/admin/v1/export", .admin, stepUp: .adminAction { (_: inout GuardInput) throws(ServiceError) in
            try gated { () throws(DeviceKeyError) in try StepUpAction.adminExport() }
        }, accepting: .any) { ctx in
            // The step-up is used up here; the accounts are read and sent page by page as the client
            // takes them (a body cut short lacks its trailer, so an import refuses it as truncated).
            try s.portability.beginExport(by: try ctx.admin())
            var response = Response(status: 200, headers: [("Content-Type", PortabilityEdge.jsonLines),
                                                           ("Content-Disposition", "attachment; filename=\"latchkey-export.jsonl\"")])
            response.stream = BodyStream { [portability = s.portability] write in
                var pending: [UInt8] = []
                _ = try portability.export(usernames: nil) { line in
                    pending += line
                    if pending.count >= 64 * 1024 { try write(pending); pending.removeAll(keepingCapacity: true) }
                }
                try write(pending)
            }
            return response
        }
        // The format and the query are refused (415, 400) before the step-up is asked for.
        add("POST", "/admin/v1/import", .admin, stepUp: .adminAction(adminKeyRefused: true, fileBody: true) { input throws(ServiceError) in
            let command = try PortabilityEdge.importCommand(input.request)
            input.loads.importCommand = command
            return try gated { () throws(DeviceKeyError) in try StepUpAction.adminImport(sha256: command.sha256) }
        }, accepting: .any) { ctx in
            // The rule hashed the file for its action; a file is hashed once.
            let command = try ctx.loads.importCommand ?? PortabilityEdge.importCommand(ctx.request)
            let outcomes = try s.portability.importFile(command, by: try ctx.admin())
            var body: [UInt8] = []
            for outcome in outcomes { body += PortabilityRenderer.outcome(outcome).serialized() + [0x0A] }
            return Response(status: 200, headers: [("Content-Type", PortabilityEdge.jsonLines)], body: body)
        }
    }
}

/// The import request parsed at the edge (SPEC "Portability" → Import).
enum PortabilityEdge {
    static let jsonLines = "application/jsonl"

    /// The body is the file: its media type names the format (415 for another), `?dryRun=true` decides without writing; the SHA-256 is of the whole body.
    static func importCommand(_ request: Request) throws(ServiceError) -> ImportCommand {
        guard !request.body.isEmpty else { throw ServiceError.invalid("the request body is the file to import") }
        guard let format = request.mediaType.flatMap(PortableFormat.init(mediaType:)) else {
            throw ServiceError(.unsupportedMediaType,
                               "send the file as application/jsonl (Latchkey's export), text/csv or application/json (a Keycloak realm export)")
        }
        let dryRun: Bool
        switch request.queryValue("dryRun") {
        case nil, "false"?: dryRun = false
        case "true"?: dryRun = true
        default: throw ServiceError.invalid("dryRun must be true or false")
        }
        return ImportCommand(format: format, body: request.body, sha256: PortableFile.hex(Digest.sha256(request.body)), dryRun: dryRun)
    }
}
