/// The server a load benchmark talks to, and how hard: `--url http://host:port`, `--origin`,
/// `--concurrency`, `--duration`. Shared by `bench login` and `bench step-up`.
struct BenchTarget {
    var host = "127.0.0.1"
    var port = 8080
    var origin = "http://localhost:8080"
    var concurrency: Int
    var duration = 10.0

    init(_ args: ParsedArguments, defaultConcurrency: Int) throws(UsageError) {
        concurrency = defaultConcurrency
        guard let url = args.value("url") else { throw UsageError(message: "--url is required, e.g. --url http://127.0.0.1:8080") }
        guard url.hasPrefix("http://") else { throw UsageError(message: "--url must be http://host:port (the benchmark speaks plain HTTP)") }
        let rest = url.dropFirst(7).split(separator: "/").first.map(String.init) ?? ""
        let hostPort = rest.split(separator: ":")
        host = hostPort.first.map(String.init) ?? "127.0.0.1"
        if host == "localhost" { host = "127.0.0.1" }
        if hostPort.count > 1 {
            guard let p = Int(hostPort[1]), (1...65535).contains(p) else { throw UsageError(message: "bad port in --url") }
            port = p
        }
        origin = args.value("origin") ?? "http://" + rest
        if let c = args.value("concurrency") {
            guard let n = Int(c), n >= 1, n <= 1024 else { throw UsageError(message: "--concurrency 1…1024") }
            concurrency = n
        }
        if let d = args.value("duration") {
            guard let n = Double(d), n > 0, n <= 3600 else { throw UsageError(message: "--duration seconds (0…3600)") }
            duration = n
        }
    }
}
