import Foundation
import PackagePlugin

/// Compiles a target's text files in as raw string literals (the EmbedText tool): the LatchkeyServer
/// target's `OpenAPI/openapi.json` becomes `enum OpenAPIText { static let text: StaticString }`.
/// The file stays the one source; the build regenerates the Swift file whenever it changes.
@main
struct EmbedTextPlugin: BuildToolPlugin {
    /// Per target: the file (relative to the target's folder) and the enum that holds it.
    static let files: [String: [(path: String, name: String)]] = [
        "LatchkeyServer": [("OpenAPI/openapi.json", "OpenAPIText")],
    ]

    func createBuildCommands(context: PluginContext, target: any Target) throws -> [Command] {
        guard let module = target as? SourceModuleTarget else { return [] }
        let tool = try context.tool(named: "EmbedText").url
        return (Self.files[target.name] ?? []).map { file in
            let input = module.directoryURL.appending(path: file.path)
            let output = context.pluginWorkDirectoryURL.appending(path: "\(file.name).swift")
            return .buildCommand(displayName: "Embedding \(file.path) as text", executable: tool,
                                 arguments: [input.path, output.path, file.name],
                                 inputFiles: [input], outputFiles: [output])
        }
    }
}
