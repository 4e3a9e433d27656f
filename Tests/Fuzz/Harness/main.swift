// latchkey-fuzz: every libFuzzer target of Latchkey in one executable.
//
// Fuzzing (scripts/fuzz.sh): built alone with `-sanitize=fuzzer,address -DFUZZING`; main hands
// its arguments (corpus folders, libFuzzer flags) to libFuzzer's driver, and LATCHKEY_FUZZ_TARGET
// names the target (an environment variable, so that libFuzzer's child processes inherit it);
// `--list` names the targets.
//
// Replay (the normal build, no sanitizer): `latchkey-fuzz TARGET FILE_OR_DIR…` runs each input once
// through the target and prints how many ran; `latchkey-fuzz --list` names the targets.
#if canImport(Glibc)
import Glibc
#endif
#if FUZZING
import CLibFuzzer

// -sanitize=fuzzer links libFuzzer's own main object, which refers to this symbol; SwiftPM's
// entry point (this file) is the one that runs, and passes the same body to the driver.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    let bytes = size == 0 || data == nil ? [] : Array(UnsafeBufferPointer(start: data, count: size))
    FuzzTargets.selected.run(bytes)
    return 0
}

if CommandLine.arguments.dropFirst().first == "--list" {
    for target in FuzzTargets.all { print("\(target.name)\t\(target.summary)") }
    exit(0)
}
_ = FuzzTargets.selected  // an unknown LATCHKEY_FUZZ_TARGET stops before libFuzzer starts
var driverArgc = CommandLine.argc
var driverArgv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = UnsafeMutablePointer(mutating: CommandLine.unsafeArgv)
exit(LLVMFuzzerRunDriver(&driverArgc, &driverArgv) { data, size in fuzzOneInput(data, size) })
#else

let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.first == "--list" {
    for target in FuzzTargets.all { print("\(target.name)\t\(target.summary)") }
    exit(0)
}
guard arguments.count >= 2, let target = FuzzTargets.named(arguments[0]) else {
    FileHandleOut.stderr("usage: latchkey-fuzz TARGET FILE_OR_DIR…   (latchkey-fuzz --list names the targets)\n")
    exit(64)
}
var count = 0
for path in arguments.dropFirst() {
    for file in Replay.files(at: path) {
        guard let bytes = Replay.read(file) else { FileHandleOut.stderr("cannot read \(file)\n"); exit(1) }
        target.run(bytes)
        count += 1
    }
}
print("\(target.name): \(count) inputs ran")
#endif
