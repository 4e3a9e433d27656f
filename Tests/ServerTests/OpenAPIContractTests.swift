import Foundation
import JSON
import LatchkeyServer
import Storage
import Testing

/// The OpenAPI document (Sources/LatchkeyServer/OpenAPI/openapi.json) and the route table name the
/// same operations, both ways: a route added without its operation, or an operation documented for
/// a route that does not exist, fails here. Each operation's `x-latchkey-access` is the guard the
/// route declares, and a route whose change needs a step-up documents the `Latchkey-Step-Up` header.
/// (That the responses match the document is checked on the suites' own traffic:
/// scripts/openapi/validate-traffic.py, and by Schemathesis against a running server.)
@Suite("OpenAPI document ↔ route table")
struct OpenAPIContractTests {
    /// Every optional route on: the FIDO conformance profile (dev mode), mail and email sign-in.
    static let fixture = Result {
        try TestServer(name: "openapi") { c in
            c.developmentMode = true
            c.conformance = true
        }
    }

    static let methods = ["get", "put", "post", "delete", "options", "head", "patch", "trace"]

    static func document() throws -> JSONValue { try JSONParser.parse(OpenAPIDocument.bytes) }

    /// "METHOD /path/{param}" of every operation in the document.
    static func documented(_ doc: JSONValue) throws -> [String: JSONValue] {
        let paths = try #require(doc["paths"]?.objectValue)
        var out: [String: JSONValue] = [:]
        for (path, item) in paths {
            for (method, operation) in item.objectValue ?? [] where methods.contains(method) {
                out["\(method.uppercased()) \(path)"] = operation
            }
        }
        return out
    }

    @Test("every route of the table is an operation of the document, and every operation a route")
    func sameOperations() throws {
        let server = try Self.fixture.get()
        let application = Application(services: server.services)
        let routes = Set(application.routes.map { "\($0.method) \($0.pattern)" })
        #expect(routes.count == application.routes.count)
        let documented = Set(try Self.documented(try Self.document()).keys)
        let undocumented = routes.subtracting(documented).sorted()
        let unrouted = documented.subtracting(routes).sorted()
        #expect(undocumented.isEmpty, "routes the document lacks: \(undocumented)")
        #expect(unrouted.isEmpty, "operations no route answers: \(unrouted)")
        #expect(routes.count >= 70, "\(routes.count) routes")
    }

    @Test("each operation names the guard its route declares, and the step-up header where the route's change needs one")
    func sameGuards() throws {
        let server = try Self.fixture.get()
        let operations = try Self.documented(try Self.document())
        for g in Application(services: server.services).guards {
            let key = "\(g.method) \(g.pattern)"
            guard let operation = operations[key] else { continue }  // reported by sameOperations
            #expect(operation["x-latchkey-access"]?.stringValue == g.access, "\(key): access \(g.access)")
            let headers = (operation["parameters"]?.arrayValue ?? []).filter { $0["in"]?.stringValue == "header" }
                .compactMap { $0["name"]?.stringValue }
            #expect(headers.contains("Latchkey-Step-Up") == g.stepUp, "\(key): step-up \(g.stepUp)")
        }
    }

    @Test("every problem code the document names is one of SPEC's, and every operation documents a 2xx or 3xx")
    func codesAndSuccesses() throws {
        let known = Set(ServiceError.Code.allCases.map(\.rawValue))
        let text = String(decoding: OpenAPIDocument.bytes, as: UTF8.self)
        let doc = try Self.document()
        for (key, operation) in try Self.documented(doc) {
            let statuses = (operation["responses"]?.objectValue ?? []).map(\.key)
            #expect(statuses.contains { $0.hasPrefix("2") || $0.hasPrefix("3") }, "\(key) documents no success")
        }
        // Every `"code": {"enum": [...]}` in a problem response.
        var named = Set<String>()
        func walk(_ v: JSONValue) {
            switch v {
            case .object(let members):
                if let code = members.first(where: { $0.key == "code" })?.value, let list = code["enum"]?.arrayValue {
                    named.formUnion(list.compactMap(\.stringValue))
                }
                members.forEach { walk($0.value) }
            case .array(let items): items.forEach(walk)
            default: break
            }
        }
        walk(doc)
        #expect(!named.isEmpty && !text.isEmpty)
        #expect(named.subtracting(known).isEmpty, "codes that are not SPEC's: \(named.subtracting(known).sorted())")
        // The operations' codes cover SPEC's list (internal_error is the database being down).
        let unused = known.subtracting(named).subtracting(["unsupported_media_type"])
        #expect(unused.isEmpty, "codes no operation documents: \(unused.sorted())")
    }

    @Test("the webhook event types the document lists are the ones a webhook may subscribe to")
    func eventTypes() throws {
        let listed = try #require(try Self.document()["components"]?["schemas"]?["EventType"]?["enum"]?.arrayValue).compactMap(\.stringValue)
        #expect(listed == EventType.webhookTypes.map(\.rawValue))
    }

    @Test("GET /openapi.json serves the compiled-in document, to anyone")
    func served() throws {
        let server = try Self.fixture.get()
        let reply = try server.client().get("/openapi.json")
        #expect(reply.status == 200)
        #expect(reply.contentType?.hasPrefix("application/json") == true)
        #expect(reply.body == OpenAPIDocument.bytes)
        #expect(reply.json?["openapi"]?.stringValue == "3.1.0")
    }

    @Test("The compiled-in document is openapi.json byte for byte (EmbedText's raw string literal changes nothing)")
    func compiledInIsTheFile() throws {
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../Sources/LatchkeyServer/OpenAPI/openapi.json").standardized
        let bytes = try [UInt8](Data(contentsOf: file))
        #expect(bytes.count > 100_000)
        #expect(OpenAPIDocument.bytes == bytes)
    }
}
