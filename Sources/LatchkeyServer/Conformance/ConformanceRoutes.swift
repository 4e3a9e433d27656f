import HTTP
import JSON

extension RouteTable {
    /// The FIDO conformance test API (SPEC "Conformance profile"), only with LATCHKEY_CONFORMANCE=1.
    /// FIDO's envelope wins on these four endpoints: a failure is its status with
    /// `{"status":"failed","errorMessage":…,"code":…}` as `application/json`, not problem+json.
    mutating func addConformanceRoutes(_ s: Services) {
        guard s.configuration.conformance else { return }
        let conformance = ConformanceService(passkeys: s.passkeys)
        add("POST", "/attestation/options", .anyone, accepting: .any) { ctx in
            let req = ctx.request
            return enveloped(req) { () throws(ServiceError) in try conformance.attestationOptions(try jsonBody(req)) }
        }
        add("POST", "/attestation/result", .anyone, accepting: .any) { ctx in
            let req = ctx.request
            return enveloped(req) { () throws(ServiceError) in try conformance.attestationResult(req.body) }
        }
        add("POST", "/assertion/options", .anyone, accepting: .any) { ctx in
            let req = ctx.request
            return enveloped(req) { () throws(ServiceError) in try conformance.assertionOptions(try jsonBody(req)) }
        }
        add("POST", "/assertion/result", .anyone, accepting: .any) { ctx in
            let req = ctx.request
            return enveloped(req) { () throws(ServiceError) in try conformance.assertionResult(req.body) }
        }
    }
}

/// 200 with the answer, or the error's status with FIDO's failure envelope — a body that is not
/// JSON too (415, code `invalid_request` as the router's own 415), so that no failure on these
/// endpoints is problem+json (the routes take any media type and check it here).
private func enveloped(_ request: Request, _ body: () throws(ServiceError) -> JSONValue) -> Response {
    if !request.body.isEmpty, request.mediaType != "application/json" {
        let failed = JSONValue.object([("status", "failed"),
                                       ("errorMessage", .string("Content-Type \(request.mediaType ?? "(none)") is not accepted here; send application/json")),
                                       ("code", "invalid_request")])
        return .json(status: 415, bytes: failed.serialized())
    }
    do {
        return .json(bytes: try body().serialized())
    } catch {
        return .json(status: error.status, bytes: ConformanceService.failed(error).serialized(), headers: error.headers)
    }
}
