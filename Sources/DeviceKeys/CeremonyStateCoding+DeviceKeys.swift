import ProtocolCore

extension CeremonyStateCoding {
    /// A device-key state (enrolment, step-up): flat (strings and nulls) and at most 16 KiB.
    init(deviceKeyState bytes: [UInt8], ceremony: String) throws(DeviceKeyError) {
        try self.init(bytes, ceremony: ceremony, maxLength: 16_384, maxDepth: 1)
    }
}
