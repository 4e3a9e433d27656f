import Foundation
import JSON
import Synchronization

/// Display names and icons for passkey providers by AAGUID, so users can tell their passkeys apart.
///
/// The tables are data: `web/aaguids.json` (source and licence noted inside; `"icons"` holds the
/// light and dark icons, `ProviderIcon`), loaded at start from
/// `LATCHKEY_AAGUIDS` by `load(fileAt:)`. The small built-in table below is the fallback when the
/// file is missing or unreadable, so a server started from another folder still names the common
/// providers. Names are display only, never a security decision. Unknown or all-zero: nil (the
/// API sends `"provider": null` and the web app shows "Passkey").
enum PasskeyProviders {
    /// Checked against the same community list as the data file.
    static let builtIn: [String: String] = [
        "fbfc3007-154e-4ecc-8c0b-6e020557d7bd": "Apple Passwords",
        "ea9b8d66-4d01-1d21-3ce4-b6b48cb575d4": "Google Password Manager",
        "08987058-cadc-4b81-b6e1-30de50dcbe96": "Windows Hello",
        "9ddd1817-af5a-4672-a2b9-3e3dd95000a9": "Windows Hello",
        "6028b017-b1d4-4c02-b4b3-afcdafc96bb2": "Windows Hello",
        "bada5566-a7aa-401f-bd96-45619a55120d": "1Password",
        "d548826e-79b4-db40-a3d8-11116f7e8349": "Bitwarden",
    ]

    private static let table = Mutex<[String: String]>(builtIn)
    /// The built-in table has no icons: without the file no passkey shows one.
    private static let icons = Mutex<[String: ProviderIconPair]>([:])

    static func name(aaguid: String) -> String? {
        table.withLock { $0[aaguid.lowercased()] }
    }

    static func icon(aaguid: String) -> ProviderIconPair? {
        icons.withLock { $0[aaguid.lowercased()] }
    }

    /// Replaces the tables with the file's `"aaguids"` and `"icons"` objects; keeps the current one (and says so
    /// on stderr) when the file is missing or malformed. Returns the number of names loaded.
    @discardableResult
    static func load(fileAt path: String) -> Int {
        guard let data = FileManager.default.contents(atPath: path) else {
            warn("no AAGUID names at \(path); using the built-in table")
            return 0
        }
        // The deployment's own file (one member per AAGUID) may outgrow a request body's member cap.
        guard let root = try? JSONParser.parse([UInt8](data), maxMembers: 1 << 16), let members = root["aaguids"]?.objectValue else {
            warn("\(path) is not {\"aaguids\":{…}}; using the built-in table")
            return 0
        }
        var names: [String: String] = [:]
        for member in members {
            guard let name = member.value.stringValue, !name.isEmpty, isAAGUID(member.key) else {
                warn("\(path): skipping entry \(member.key)")
                continue
            }
            names[member.key.lowercased()] = name
        }
        var pairs: [String: ProviderIconPair] = [:]
        for member in root["icons"]?.objectValue ?? [] {
            guard isAAGUID(member.key), let pair = ProviderIconPair(light: member.value["light"]?.stringValue, dark: member.value["dark"]?.stringValue) else {
                warn("\(path): skipping the icon of \(member.key) (not a PNG or SVG data: URL of at most \(ProviderIcon.maxBytes) bytes)")
                continue
            }
            pairs[member.key.lowercased()] = pair
        }
        table.withLock { $0 = names }
        icons.withLock { $0 = pairs }
        return names.count
    }

    /// 8-4-4-4-12 hexadecimal.
    static func isAAGUID(_ s: String) -> Bool {
        let groups = s.split(separator: "-", omittingEmptySubsequences: false)
        return groups.map(\.count) == [8, 4, 4, 4, 12] && groups.allSatisfy { $0.allSatisfy(\.isHexDigit) }
    }

    private static func warn(_ message: String) {
        FileHandle.standardError.write(Data("latchkey: \(message)\n".utf8))
    }
}
