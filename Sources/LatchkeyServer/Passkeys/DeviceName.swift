import Foundation

/// The name a new passkey gets when its AAGUID names no provider (not "Passkey", which
/// the list then showed twice, and «Passkey "Passkey"» in the sessions): the device it was made on,
/// from the registering request's User-Agent ("Chrome on Android", "Safari on iPhone"), else the day
/// it was made ("Passkey of 2026-12-01"). Only a label the person can rename; never trusted.
enum DeviceName {
    static func from(userAgent: String?, createdAt: Date) -> String {
        if let ua = userAgent, ua.utf8.count <= 1024, let browser = browser(ua), let system = system(ua) {
            return "\(browser) on \(system)"
        }
        return "Passkey of " + day(createdAt)
    }

    /// The browser, most specific first (Edge and Opera say "Chrome" too, Chrome says "Safari").
    static func browser(_ ua: String) -> String? {
        let order: [(token: String, name: String)] = [
            ("Edg/", "Edge"), ("EdgA/", "Edge"), ("EdgiOS/", "Edge"), ("OPR/", "Opera"), ("SamsungBrowser/", "Samsung Internet"),
            ("Firefox/", "Firefox"), ("FxiOS/", "Firefox"), ("CriOS/", "Chrome"), ("Chromium/", "Chromium"), ("Chrome/", "Chrome"),
            ("Safari/", "Safari"),
        ]
        return order.first { ua.contains($0.token) }?.name
    }

    static func system(_ ua: String) -> String? {
        let order: [(token: String, name: String)] = [
            ("iPhone", "iPhone"), ("iPad", "iPad"), ("Android", "Android"), ("CrOS", "ChromeOS"), ("Windows", "Windows"),
            ("Mac OS X", "macOS"), ("Macintosh", "macOS"), ("Linux", "Linux"),
        ]
        return order.first { ua.contains($0.token) }?.name
    }

    static func day(_ date: Date) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let c = calendar.dateComponents([.year, .month, .day], from: date)
        return String(format: "%04d-%02d-%02d", c.year ?? 0, c.month ?? 0, c.day ?? 0)
    }
}
