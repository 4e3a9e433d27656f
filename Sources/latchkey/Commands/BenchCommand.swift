enum BenchCommand: Command {
    static let name = "bench"
    static let summary = "measure verification speed against OpenSSL in the same run"
    static let help = "usage: latchkey bench verify [--seconds S] [--threads N]"
    static func run(_ arguments: [String]) -> Int32 {
        printError("latchkey bench: not built yet")
        return ExitCode.failure
    }
}
