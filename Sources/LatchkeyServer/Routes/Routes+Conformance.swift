import HTTP
import JSON

extension RouteTable {
    /// The FIDO conformance test API (SPEC "Conformance profile"), only with LATCHKEY_CONFORMANCE=1.
    /// FIDO's envelope wins on these four endpoints: a failure is its status with
    /// `{"status":"failed","errorMessage":…,"code":…}` as `application/json`, not problem+json.
    mutating func addConformanceRoutes(_ s: Services) {
        guard s.configuration.conformance else { return }
        let conformance = ConformanceService(passkeys: s.passkeys)
        add("POST", "/attestation/options") { req, _ in
            enveloped { () throws(ServiceError) in try conformance.attestationOptions(try jsonBody(req)) }
        }
        add("POST", "/attestation/result") { req, _ in
            enveloped { () throws(ServiceError) in try conformance.attestationResult(req.body) }
        }
        add("POST", "/assertion/options") { req, _ in
            enveloped { () throws(ServiceError) in try conformance.assertionOptions(try jsonBody(req)) }
        }
        add("POST", "/assertion/result") { req, _ in
            enveloped { () throws(ServiceError) in try conformance.assertionResult(req.body) }
        }
    }
}

/// 200 with the answer, or the error's status with FIDO's failure envelope.
private func enveloped(_ body: () throws(ServiceError) -> JSONValue) -> Response {
    do {
        return .json(bytes: try body().serialized())
    } catch {
        return .json(status: error.status, bytes: ConformanceService.failed(error).serialized(), headers: error.headers)
    }
}
