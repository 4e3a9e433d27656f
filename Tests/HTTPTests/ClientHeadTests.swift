@testable import HTTP
import Testing

/// The load generator's and the tests' HTTP client reads a response head as bytes (RFC 9112 §4:
/// `HTTP-version SP status-code SP [reason-phrase]`, then field lines, §5: name ":" OWS value OWS).
@Suite("HTTP client: response heads")
struct ClientHeadTests {
    func parse(_ text: String) throws(HTTPError) -> (status: Int, isHTTP10: Bool, headers: [(String, String)]) {
        try HTTPClient.parseHead(Array(text.utf8)[...])
    }

    @Test("status, version and fields with their optional whitespace trimmed")
    func fields() throws {
        let head = try parse("HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nX-Empty:\r\nX-Spaced: \t a b \t\r\nLocation:/v1/x")
        #expect(head.status == 201 && !head.isHTTP10)
        #expect(head.headers.map(\.0) == ["Content-Type", "X-Empty", "X-Spaced", "Location"])
        #expect(head.headers.map(\.1) == ["application/json", "", "a b", "/v1/x"])
        #expect(try parse("HTTP/1.0 200 OK").isHTTP10)
        #expect(try parse("HTTP/1.1 204").status == 204, "a reason phrase is optional")
        #expect(try parse("HTTP/1.1 404 ").headers.isEmpty)
    }

    @Test("a status line or field line that is not HTTP/1.x is refused")
    func malformed() {
        for bad in ["", "HTTP/2 200 OK", "HTTP/1.1 20 OK", "HTTP/1.1 2000 OK", "HTTP/1.1 2x0 OK", "HTTP/1.1  200 OK", "HTTP/1.1 200OK",
                    "HTTP/1.1 099 Early", "HTTP/1.1 200 OK\r\nno colon here"] {
            #expect(throws: HTTPError.self, "\(bad)") { try parse(bad) }
        }
    }
}
