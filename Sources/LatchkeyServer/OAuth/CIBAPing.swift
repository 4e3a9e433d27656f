import Curl
import Foundation
import JSON
import Storage

/// CIBA Core §10.2: the ping callback, from the outbox (channel `ciba_ping`): `POST
/// {"auth_req_id"}` with `Authorization: Bearer <client_notification_token>` to the client's
/// registered notification endpoint, under the webhook address rules (the URL checked again and
/// every address its host resolves to), retried until its delivery's age limit unless the endpoint
/// refused it outright.
struct CIBAPinger: Sendable {
    let sender: WebhookSender

    func deliver(_ d: ClaimedDelivery) -> OutboxWorker.Outcome {
        guard let endpoint = d.data["endpoint"]?.stringValue, let token = d.data["token"]?.stringValue,
              let id = d.data["authReqId"]?.stringValue else { return .giveUp(statusCode: nil, error: "the ping event is incomplete") }
        let destination: CheckedDestination
        do { destination = try sender.destination(endpoint) } catch { return .retry(statusCode: nil, error: error.detail) }
        var options = CurlOptions()
        options.timeoutSeconds = sender.policy.timeoutSeconds
        options.protocols = sender.policy.protocols
        options.maxResponseBytes = 1024
        options.userAgent = "Latchkey-CIBA/1"
        options.maxRedirects = 0
        options.connectOnlyTo = destination.addresses.map(\.bytes)
        options.caFile = sender.policy.caFile
        let body = JSONValue.object([("auth_req_id", .string(id))]).serialized()
        do {
            let response = try Curl.post(destination.url.text, headers: [("Content-Type", "application/json"), ("Authorization", "Bearer " + token)],
                                         body: body, options: options)
            if (200...299).contains(response.status) { return .delivered(statusCode: response.status) }
            // A refusal of the notification itself (401 or 403 for the bearer, any other 4xx but
            // 408, 425 and 429) is final: sending it again cannot change the answer, and the client
            // still polls for its result (OpenID CIBA conformance: no retry after a 401). A redirect
            // is never followed (CIBA Core §10.2) and counts as a failure to retry.
            if (400...499).contains(response.status), ![408, 425, 429].contains(response.status) {
                return .giveUp(statusCode: response.status, error: "HTTP \(response.status): the endpoint refused the notification")
            }
            return .retry(statusCode: response.status, error: "HTTP \(response.status)")
        } catch {
            return .retry(statusCode: nil, error: error.description)
        }
    }
}
