import Foundation

/// A passkey provider's icon as it is served (SPEC "Portability", provider names and icons): PNG
/// or SVG only, at most `maxBytes`, from a base64 `data:` URL (the community AAGUID list's
/// `icons` in `web/aaguids.json`, or a metadata statement's `icon`). Display only, like the name.
struct ProviderIcon: Sendable, Equatable {
    static let png = "image/png"
    static let svg = "image/svg+xml"
    /// A larger icon is not one: no passkey list carries a URL that would serve it.
    static let maxBytes = 65_536

    let contentType: String
    let bytes: [UInt8]

    /// `data:image/png;base64,…` with the PNG signature, or `data:image/svg+xml;base64,…` whose
    /// text is UTF-8 with an `<svg` element; nil for anything else (another type, not base64,
    /// empty, over `maxBytes`). The SVG is served as it is: the route's `sandbox` CSP and `nosniff`
    /// keep a script inside it from running in the server's origin.
    init?(dataURL: String) {
        let url = dataURL.utf8
        guard url.count <= Self.maxBytes * 4 / 3 + 64, let comma = dataURL.firstIndex(of: ",") else { return nil }
        let header = dataURL[..<comma].lowercased()
        let type: String
        switch header {
        case "data:image/png;base64": type = Self.png
        case "data:image/svg+xml;base64": type = Self.svg
        default: return nil
        }
        let payload = dataURL[dataURL.index(after: comma)...].filter { !$0.isWhitespace }
        guard let data = Data(base64Encoded: String(payload)), !data.isEmpty, data.count <= Self.maxBytes else { return nil }
        let bytes = [UInt8](data)
        switch type {
        case Self.png:
            guard bytes.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) else { return nil }
        default:
            guard let text = String(validating: bytes, as: UTF8.self), text.contains("<svg") else { return nil }
        }
        contentType = type
        self.bytes = bytes
    }
}

/// A provider's light and dark icons (the same one twice when its source has one).
struct ProviderIconPair: Sendable, Equatable {
    let light: ProviderIcon
    let dark: ProviderIcon

    /// `"light"` or `"dark"`; nil for any other theme.
    func icon(theme: String) -> ProviderIcon? {
        switch theme {
        case "light": light
        case "dark": dark
        default: nil
        }
    }

    /// A table entry `{"light": data URL, "dark"?: data URL}`: "dark" defaults to "light"; nil
    /// when "light" is not an icon or a "dark" that was sent is not one.
    init?(light: String?, dark: String?) {
        guard let l = light.flatMap(ProviderIcon.init(dataURL:)) else { return nil }
        if let dark {
            guard let d = ProviderIcon(dataURL: dark) else { return nil }
            self.dark = d
        } else {
            self.dark = l
        }
        self.light = l
    }

    init(both icon: ProviderIcon) {
        light = icon
        dark = icon
    }
}
