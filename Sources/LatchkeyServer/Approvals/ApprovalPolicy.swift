import JSON

/// Who a policy names (SPEC "Quorum approvals" → "Policies"): one account by Latchkey's user id,
/// or every account with the admin role.
enum ApprovalPrincipal: Sendable, Equatable {
    case user(String)
    case admins

    var json: JSONValue {
        switch self {
        case .user(let id): .object([("user", .string(id))])
        case .admins: .object([("role", .string("admin"))])
        }
    }
}

/// A quorum policy: who may open an approval under it, who may approve, how many distinct
/// accounts it needs, the time lock, the lifetime, and what the owner hears. Parsed strictly (an
/// unknown or missing member, a wrong type or range is 400 `invalid_request`) and stored as `json`.
struct ApprovalPolicy: Sendable, Equatable {
    let approvers: [ApprovalPrincipal]
    let requesters: [ApprovalPrincipal]
    let needed: Int
    let delay: Int
    let expires: Int
    let notifyOwner: Bool
    let breakGlass: Bool
    let requesterCounts: Bool

    static let members = ["approvers", "requesters", "needed", "delay", "expires", "notifyOwner", "breakGlass", "requesterCounts"]
    /// Bounds: at most 32 principals a list, 100 approvers needed, a delay and a lifetime of 30 days.
    static let maxPrincipals = 32
    static let maxNeeded = 100
    static let maxSeconds = 30 * 86_400

    /// A policy name: 1…64 of `A–Z a–z 0–9 . _ -`.
    static func isName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 64
            && name.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || [0x2E, 0x5F, 0x2D].contains($0) }
    }

    init(approvers: [ApprovalPrincipal], requesters: [ApprovalPrincipal], needed: Int, delay: Int, expires: Int, notifyOwner: Bool,
         breakGlass: Bool, requesterCounts: Bool) {
        self.approvers = approvers
        self.requesters = requesters
        self.needed = needed
        self.delay = delay
        self.expires = expires
        self.notifyOwner = notifyOwner
        self.breakGlass = breakGlass
        self.requesterCounts = requesterCounts
    }

    init(parsing body: JSONValue) throws(ServiceError) {
        guard let members = body.objectValue else { throw ServiceError.invalid("the policy must be a JSON object") }
        for (key, _) in members where !Self.members.contains(key) { throw ServiceError.invalid("unknown policy member \(key)") }
        func int(_ key: String, _ range: ClosedRange<Int>) throws(ServiceError) -> Int {
            guard case .number(let d)? = body[key], d == d.rounded(), d >= Double(range.lowerBound), d <= Double(range.upperBound) else {
                throw ServiceError.invalid("\(key) must be a whole number in \(range.lowerBound)…\(range.upperBound)")
            }
            return Int(d)
        }
        func bool(_ key: String) throws(ServiceError) -> Bool {
            guard let b = body[key]?.boolValue else { throw ServiceError.invalid("\(key) must be true or false") }
            return b
        }
        approvers = try Self.principals(body["approvers"], "approvers")
        requesters = try Self.principals(body["requesters"], "requesters")
        needed = try int("needed", 1...Self.maxNeeded)
        delay = try int("delay", 0...Self.maxSeconds)
        expires = try int("expires", 60...Self.maxSeconds)
        notifyOwner = try bool("notifyOwner")
        breakGlass = try bool("breakGlass")
        requesterCounts = try bool("requesterCounts")
        guard delay < expires else { throw ServiceError.invalid("delay must be shorter than expires: the approval could never be used") }
        if breakGlass, needed != 1 || delay != 0 { throw ServiceError.invalid("a breakGlass policy needs needed 1 and delay 0") }
        let named = approvers.filter { $0 != .admins }.count
        if !approvers.contains(.admins), named < needed {
            throw ServiceError.invalid("needed is \(needed) but the policy names only \(named) approvers")
        }
    }

    static func principals(_ value: JSONValue?, _ name: String) throws(ServiceError) -> [ApprovalPrincipal] {
        guard let list = value?.arrayValue, !list.isEmpty, list.count <= maxPrincipals else {
            throw ServiceError.invalid("\(name) must be a list of 1…\(maxPrincipals) {\"user\":<user id>} or {\"role\":\"admin\"}")
        }
        var out: [ApprovalPrincipal] = []
        for item in list {
            let principal: ApprovalPrincipal
            switch item.objectValue.map({ $0.map(\.key) }) {
            case ["user"]?:
                guard let id = item["user"]?.stringValue, Identifiers.opaque(id) != nil else {
                    throw ServiceError.invalid("\(name): a user is named by Latchkey's user id")
                }
                principal = .user(id)
            case ["role"]?:
                guard item["role"]?.stringValue == "admin" else { throw ServiceError.invalid("\(name): the only role is \"admin\"") }
                principal = .admins
            default:
                throw ServiceError.invalid("\(name): each entry is {\"user\":<user id>} or {\"role\":\"admin\"}")
            }
            if !out.contains(principal) { out.append(principal) }
        }
        return out
    }

    /// The policy as the admin API shows and stores it.
    var json: JSONValue {
        .object([("approvers", .array(approvers.map(\.json))), ("requesters", .array(requesters.map(\.json))),
                 ("needed", .number(Double(needed))), ("delay", .number(Double(delay))), ("expires", .number(Double(expires))),
                 ("notifyOwner", .bool(notifyOwner)), ("breakGlass", .bool(breakGlass)), ("requesterCounts", .bool(requesterCounts))])
    }

    /// A stored document (written by `json`); nil when it is not one.
    init?(stored text: String) {
        guard let value = try? JSONParser.parse(Array(text.utf8)), let parsed = try? ApprovalPolicy(parsing: value) else { return nil }
        self = parsed
    }

    static func names(_ list: [ApprovalPrincipal], userId: String, isAdmin: Bool) -> Bool {
        list.contains { p in
            switch p {
            case .user(let id): id == userId
            case .admins: isAdmin
            }
        }
    }

    func isRequester(_ userId: String, isAdmin: Bool) -> Bool { Self.names(requesters, userId: userId, isAdmin: isAdmin) }
    func namesApprover(_ userId: String, isAdmin: Bool) -> Bool { Self.names(approvers, userId: userId, isAdmin: isAdmin) }
}
