/// The OpenAPI 3.1 document of Latchkey's whole HTTP surface: `openapi.json` beside this file, the
/// contract's machine-readable form (SPEC "HTTP contract"), compiled into the binary so that every
/// install serves the document of exactly the routes it has (`GET /openapi.json`).
///
/// Kept true by tests: `OpenAPIContractTests` proves that the route table and the document name the
/// same operations, scripts/openapi/validate-traffic.py checks every response the HTTP suites receive
/// against it, Schemathesis (scripts/openapi/schemathesis.sh) tests a running server from it, and
/// docs/api.md is generated from it (scripts/openapi/api-reference.py).
public enum OpenAPIDocument {
    /// The document's bytes (JSON, UTF-8).
    public static let bytes: [UInt8] = OpenAPIText.text.withUTF8Buffer { Array($0) }
}
