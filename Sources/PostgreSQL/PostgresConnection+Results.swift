import CLibPQ

/// Reading a libpq result: its error, its affected-row count, and its rows (copied out of the
/// `PGresult` once, so it can be cleared at once).
extension PostgresConnection {
    /// A failed result: a server error (`.query` with SQLSTATE) unless the connection broke,
    /// which is `.connection` (with SQLSTATE when the server said why, e.g. 57P01).
    static func failure(_ handle: OpaquePointer, _ result: OpaquePointer?) -> PostgresError {
        let sqlState = result.flatMap { lk_result_sqlstate($0) }.map { String(cString: $0) }
        var message = result.flatMap { lk_result_primary_message($0) }.map { String(cString: $0) } ?? Self.message(handle)
        if let detail = result.flatMap({ lk_result_detail($0) }).map({ String(cString: $0) }) {
            message += " (\(detail))"
        }
        let constraint = result.flatMap { lk_result_constraint($0) }.map { String(cString: $0) }
        let lost = PQstatus(handle) != CONNECTION_OK || sqlState?.hasPrefix("57P") == true || sqlState?.hasPrefix("08") == true
        return PostgresError(lost ? .connection : .query, message, sqlState: sqlState, constraint: constraint)
    }

    static func message(_ handle: OpaquePointer) -> String {
        guard let text = PQerrorMessage(handle) else { return "unknown libpq error" }
        return String(cString: text).trimmingTrailingNewlines()
    }

    static func affectedRows(_ result: OpaquePointer) -> Int {
        guard let text = PQcmdTuples(result) else { return 0 }
        return Int(String(cString: text)) ?? 0
    }

    /// The column names and types of `result`.
    static func layout(of result: OpaquePointer) -> ColumnLayout {
        let columnCount = Int(PQnfields(result))
        var columns: [String] = []
        var types: [UInt32] = []
        columns.reserveCapacity(columnCount)
        types.reserveCapacity(columnCount)
        for c in 0..<columnCount {
            columns.append(PQfname(result, Int32(c)).map { String(cString: $0) } ?? "?column?")
            types.append(UInt32(PQftype(result, Int32(c))))
        }
        return ColumnLayout(columns: columns, columnTypes: types)
    }

    /// Whether `result` has `layout`'s shape (a cheap check on a cached layout: count and types).
    static func matches(_ layout: ColumnLayout, _ result: OpaquePointer) -> Bool {
        guard Int(PQnfields(result)) == layout.columnTypes.count else { return false }
        for (c, type) in layout.columnTypes.enumerated() where UInt32(PQftype(result, Int32(c))) != type { return false }
        return true
    }

    static func materialize(_ result: OpaquePointer, _ layout: ColumnLayout) -> [Row] {
        let rowCount = Int(PQntuples(result))
        let columnCount = layout.columns.count
        guard columnCount > 0 else { return [] }
        var cells: [(start: Int, length: Int)] = []
        cells.reserveCapacity(rowCount * columnCount)
        var bytes: [UInt8] = []
        for r in 0..<rowCount {
            for c in 0..<columnCount {
                if PQgetisnull(result, Int32(r), Int32(c)) == 1 {
                    cells.append((bytes.count, -1))
                    continue
                }
                let length = Int(PQgetlength(result, Int32(r), Int32(c)))
                let start = bytes.count
                if length > 0, let value = PQgetvalue(result, Int32(r), Int32(c)) {
                    value.withMemoryRebound(to: UInt8.self, capacity: length) {
                        bytes.append(contentsOf: UnsafeBufferPointer(start: $0, count: length))
                    }
                }
                cells.append((start, length))
            }
        }
        let storage = ResultStorage(layout: layout, rowCount: rowCount, cells: cells, bytes: bytes)
        return (0..<rowCount).map { Row(storage: storage, row: $0) }
    }
}

extension String {
    func trimmingTrailingNewlines() -> String {
        var s = Substring(self)
        while let last = s.last, last.isNewline || last == " " { s = s.dropLast() }
        return String(s)
    }
}
