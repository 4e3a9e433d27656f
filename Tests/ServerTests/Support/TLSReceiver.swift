import Foundation
import JSON
import PostgreSQLTesting

/// A real HTTPS webhook receiver on 127.0.0.1 (Python's http.server behind `ssl`), with a certificate
/// for `names` from a throwaway CA (`caFile`, for LATCHKEY_WEBHOOK_CA). It logs every TCP connection
/// it accepts — before the TLS handshake, so "nothing reached it" means not even a connection — and
/// every request; it answers 204, or 307 to `/elsewhere` on `/redirect`.
final class TLSReceiver {
    let directory: String
    let port: Int
    private let process: Process

    var caFile: String { directory + "/ca.pem" }
    var logFile: String { directory + "/log.jsonl" }

    static let script = #"""
        import http.server, json, socket, socketserver, ssl, sys, threading
        directory = sys.argv[1]
        lock = threading.Lock()
        def log(entry):
            with lock, open(directory + "/log.jsonl", "a") as f:
                f.write(json.dumps(entry) + "\n")
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(directory + "/server.pem", directory + "/server.key")
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                log({"event": "request", "path": self.path, "host": self.headers.get("Host", ""),
                     "id": self.headers.get("webhook-id", ""), "body": body.decode("utf-8", "replace")})
                if self.path == "/redirect":
                    self.send_response(307); self.send_header("Location", "/elsewhere")
                else:
                    self.send_response(204)
                self.send_header("Content-Length", "0"); self.end_headers()
            def log_message(self, *args): pass
        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True
            def get_request(self):
                raw, address = self.socket.accept()
                log({"event": "connection", "from": address[0]})
                raw.settimeout(10)
                try:
                    return context.wrap_socket(raw, server_side=True), address
                except (ssl.SSLError, OSError) as e:
                    log({"event": "handshake_failed", "error": str(e)})
                    raw.close()
                    raise
        server = Server(("127.0.0.1", 0), Handler)
        with open(directory + "/port.tmp", "w") as f: f.write(str(server.server_address[1]))
        import os; os.rename(directory + "/port.tmp", directory + "/port")
        server.serve_forever()
        """#

    init(names: [String]) throws {
        directory = NSTemporaryDirectory() + "latchkey-tls-receiver-\(uniqueSuffix())"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let san = names.map { "DNS:\($0)" }.joined(separator: ",")
        try Data("subjectAltName=\(san)\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n".utf8)
            .write(to: URL(fileURLWithPath: directory + "/ext.cnf"))
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
        try Self.run("/usr/bin/openssl", ["req", "-x509"] + ec + ["-days", "2", "-subj", "/CN=Latchkey test webhook CA",
                     "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
                     "-keyout", directory + "/ca.key", "-out", directory + "/ca.pem"])
        try Self.run("/usr/bin/openssl", ["req"] + ec + ["-subj", "/CN=\(names[0])", "-keyout", directory + "/server.key",
                     "-out", directory + "/server.csr"])
        try Self.run("/usr/bin/openssl", ["x509", "-req", "-in", directory + "/server.csr", "-CA", directory + "/ca.pem",
                     "-CAkey", directory + "/ca.key", "-CAcreateserial", "-days", "2", "-extfile", directory + "/ext.cnf",
                     "-out", directory + "/server.pem"])
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-c", Self.script, directory]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.standardError
        try process.run()
        let deadline = Date().addingTimeInterval(20)
        var found: Int? = nil
        while found == nil, Date() < deadline, process.isRunning {
            found = (try? String(contentsOfFile: directory + "/port", encoding: .utf8)).flatMap { Int($0) }
            if found == nil { usleep(50_000) }
        }
        guard let found else {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            throw TestSetupError("the TLS receiver did not start")
        }
        port = found
    }

    private static func run(_ tool: String, _ arguments: [String]) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: tool)
        p.arguments = arguments
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else { throw TestSetupError("\(tool) \(arguments.first ?? "") failed") }
    }

    /// SIGKILL (the test process blocks SIGTERM in the threads that spawn children, and they inherit
    /// the mask), then a bounded wait for the exit.
    func stop() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        for _ in 0..<100 where process.isRunning { usleep(50_000) }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Every logged entry so far.
    var log: [JSONValue] {
        guard let text = try? String(contentsOfFile: logFile, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { try? JSONParser.parse(Array($0.utf8)) }
    }
    var connections: Int { log.filter { $0["event"]?.stringValue == "connection" }.count }
    var requests: [JSONValue] { log.filter { $0["event"]?.stringValue == "request" } }
}
