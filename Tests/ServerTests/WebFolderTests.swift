import Foundation
import LatchkeyServer
import PostgreSQL
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `serve` started from another folder: the web folder is `LATCHKEY_WEB_DIR`, else `./web`, else
/// `../share/latchkey/web` beside the binary (the .deb's layout); a folder lacking a file it serves is
/// refused before anything listens (exit 64, naming the setting), never a server that answers 404 at `/`.
/// Real `latchkey serve` and `latchkey config check` processes (the built binary).
@Suite("serve: the web folder")
struct WebFolderTests {
    /// The pages the issue found answering 404 from another folder.
    static let pages = ["/", "/admin/", "/latchkey.js", "/authorize"]
    static let repositoryWeb = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("web").path

    static func emptyFolder() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("latchkey-web-\(uniqueSuffix())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }

    static func runUntilExit(_ serve: ServeProcess, seconds: Double = 30) -> Int32? {
        let deadline = Date().addingTimeInterval(seconds)
        while serve.isRunning, Date() < deadline { usleep(50_000) }
        if serve.isRunning { serve.killHard(); return nil }
        usleep(100_000)  // the pipe's last bytes
        return serve.exitStatus
    }

    @Test("started from a folder without web/ and LATCHKEY_WEB_DIR unset: exit 64 naming the setting and the fix, before it listens")
    func refusedFromAnotherFolder() throws {
        let binary = try #require(ServeProcess.findBinary(), "build the latchkey executable (swift build --build-tests)")
        let elsewhere = try Self.emptyFolder()
        defer { try? FileManager.default.removeItem(at: elsewhere) }
        let scratch = try TestDatabase.Scratch()
        let serve = try ServeProcess(binary: binary, environment: ServeConfigurationTests.production(databaseURL: scratch.url),
                                     directory: elsewhere)
        let status = Self.runUntilExit(serve)
        let output = serve.output
        #expect(status == 64, "\(output)")
        #expect(output.contains("LATCHKEY_WEB_DIR") && output.contains("index.html"), "\(output)")
        #expect(output.contains("/usr/share/latchkey/web"), "says where the package puts it: \(output)")
        #expect(!output.contains("listening at") && !output.contains("serving rpId"), "\(output)")
        // Nothing reached the database.
        #expect(try scratch.connect().query("SELECT count(*) AS n FROM pg_tables WHERE tablename = 'origins'")[0].int("n") == 0)
    }

    @Test("a LATCHKEY_WEB_DIR that lacks a served file is refused, naming the file")
    func incompleteFolderRefused() throws {
        let binary = try #require(ServeProcess.findBinary(), "build the latchkey executable (swift build --build-tests)")
        let partial = try Self.emptyFolder()
        defer { try? FileManager.default.removeItem(at: partial) }
        try Data("<!doctype html>".utf8).write(to: partial.appendingPathComponent("index.html"))
        let scratch = try TestDatabase.Scratch()
        var env = ServeConfigurationTests.production(databaseURL: scratch.url)
        env["LATCHKEY_WEB_DIR"] = partial.path
        let serve = try ServeProcess(binary: binary, environment: env)
        let status = Self.runUntilExit(serve)
        #expect(status == 64, "\(serve.output)")
        #expect(serve.output.contains("LATCHKEY_WEB_DIR: the web folder \(partial.path) lacks app.js"), "\(serve.output)")
    }

    @Test("config check from another folder says serve would refuse, and why (exit 1)")
    func configCheckRefuses() throws {
        let binary = try #require(ServeProcess.findBinary(), "build the latchkey executable (swift build --build-tests)")
        let elsewhere = try Self.emptyFolder()
        defer { try? FileManager.default.removeItem(at: elsewhere) }
        var env = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("LATCHKEY_") }
        env.merge(ServeConfigurationTests.production(databaseURL: "postgresql://unused@127.0.0.1:1/none")) { $1 }
        for (web, refused) in [(nil, true), (Self.repositoryWeb, false)] as [(String?, Bool)] {
            if let web { env["LATCHKEY_WEB_DIR"] = web }
            let process = Process()
            process.executableURL = URL(fileURLWithPath: binary)
            process.arguments = ["config", "check"]
            process.environment = env
            process.currentDirectoryURL = elsewhere
            let pipe = Pipe()
            process.standardOutput = pipe
            process.standardError = pipe
            try process.run()
            let text = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            if refused {
                #expect(process.terminationStatus == 1, "\(text)")
                #expect(text.contains("refused: latchkey serve would not start: LATCHKEY_WEB_DIR"), "\(text)")
            } else {
                #expect(process.terminationStatus == 0, "\(text)")
                #expect(text.contains(Self.repositoryWeb), "the effective folder is shown: \(text)")
            }
        }
    }

    /// The package's layout: `<prefix>/bin/latchkey` and `<prefix>/share/latchkey/web`, started from a
    /// folder of its own with no setting, serves the pages (the .deb's /usr/bin and /usr/share).
    @Test("the binary finds ../share/latchkey/web beside it, and /, /admin/, /latchkey.js, /authorize answer 200")
    func packageLayoutServesPages() throws {
        let built = try #require(ServeProcess.findBinary(), "build the latchkey executable (swift build --build-tests)")
        let prefix = try Self.emptyFolder()
        defer { try? FileManager.default.removeItem(at: prefix) }
        let fm = FileManager.default
        try fm.createDirectory(at: prefix.appendingPathComponent("bin"), withIntermediateDirectories: true)
        try fm.createDirectory(at: prefix.appendingPathComponent("share/latchkey"), withIntermediateDirectories: true)
        let binary = prefix.appendingPathComponent("bin/latchkey").path
        // A hard link: /proc/self/exe names the link's own path (a symbolic link would resolve back).
        if link(built, binary) != 0 { try fm.copyItem(atPath: built, toPath: binary) }
        try fm.copyItem(atPath: Self.repositoryWeb, toPath: prefix.appendingPathComponent("share/latchkey/web").path)
        let elsewhere = prefix.appendingPathComponent("run")
        try fm.createDirectory(at: elsewhere, withIntermediateDirectories: true)

        let scratch = try TestDatabase.Scratch()
        let serve = try ServeProcess(binary: binary, environment: ServeConfigurationTests.production(databaseURL: scratch.url),
                                     directory: elsewhere)
        defer { serve.stop() }
        let port = try serve.waitUntilServing()
        let client = Client(Endpoint(port: port, rpId: "", origin: "", adminKey: nil))
        for page in Self.pages {
            let reply = try client.get(page)
            #expect(reply.status == 200, "\(page): \(reply)")
        }
        #expect(try client.get("/").text.contains("<html"))
        withExtendedLifetime(scratch) {}
    }
}
