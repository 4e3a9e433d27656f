import Glibc

/// Where the web app and the console are read from (`LATCHKEY_WEB_DIR`). Given, that folder. Unset,
/// the first of these that holds `index.html`: `./web` (a checkout, `scripts/run.sh`), then
/// `<the binary's folder>/../share/latchkey/web` (the .deb: /usr/bin/latchkey reads
/// /usr/share/latchkey/web); none of them, `web`. `serve` refuses to start (exit 64) while a file it
/// serves is missing there, so a server started from another folder never answers 404 at `/`.
public enum WebFolder {
    /// The folder `LATCHKEY_WEB_DIR` names, or the first of `candidates` that holds `index.html`.
    static func resolve(setting: String?, candidates: [String] = searchPath()) -> String {
        if let setting, !setting.isEmpty { return setting }
        return candidates.first { readable("\($0)/index.html") } ?? "web"
    }

    /// The folders looked in when `LATCHKEY_WEB_DIR` is unset, in order.
    public static func searchPath(executable: String? = executablePath()) -> [String] {
        var out = ["web"]
        if let executable, let slash = executable.lastIndex(of: "/") {
            let bin = executable[..<slash]
            let prefix = bin.lastIndex(of: "/").map { String(bin[..<$0]) } ?? "."
            out.append("\(prefix)/share/latchkey/web")
        }
        return out
    }

    /// The web folder's files that the routes serve and it lacks (relative to it), in route order.
    public static func missingFiles(in directory: String) -> [String] {
        var seen = Set<String>()
        let files = (WebAssets.files.map(\.file) + WebAssets.clientFiles.map(\.file)).filter { seen.insert($0).inserted }
        return files.filter { !readable("\(directory)/\($0)") }
    }

    /// Why `serve` would not start with this web folder, naming the setting and the fix; nil when
    /// every file is there.
    public static func refusal(directory: String) -> String? {
        let missing = missingFiles(in: directory)
        guard !missing.isEmpty else { return nil }
        let shown = missing.prefix(3).joined(separator: ", ") + (missing.count > 3 ? " and \(missing.count - 3) more" : "")
        return "LATCHKEY_WEB_DIR: the web folder \(directory) lacks \(shown) (unset, serve looks in "
            + searchPath().joined(separator: " and ") + "): set LATCHKEY_WEB_DIR to the folder that holds index.html "
            + "(the .deb installs it at /usr/share/latchkey/web; a checkout has web/)"
    }

    static func readable(_ path: String) -> Bool {
        guard let handle = fopen(path, "rb") else { return false }
        fclose(handle)
        return true
    }

    /// This process's executable (symbolic links resolved), from /proc/self/exe.
    public static func executablePath() -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard n > 0 else { return nil }
        return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

extension Configuration {
    /// `serve`'s refusal when the web folder lacks a file it serves (`WebFolder`).
    public func webFolderRefusal() -> String? { WebFolder.refusal(directory: webDirectory) }
}
