/// This build's version: `latchkey --version`, `/healthz` and the `latchkey_build_info` metric.
/// It is the newest release heading in CHANGELOG.md (a test keeps the two equal): bump both when
/// cutting a release.
public enum LatchkeyBuild {
    public static let version = "0.1.0"
}
