import LatchkeyServer
#if canImport(Glibc)
import Glibc
#endif

// `latchkey <verb> …`: one type per verb; exit 0 success, 1 failure, 64 bad usage (sysexits EX_USAGE).
let commands: [any Command.Type] = [
    ServeCommand.self, MigrateCommand.self, OriginsCommand.self, AppsCommand.self, WellKnownCommand.self, APKKeyHashCommand.self, InspectCommand.self, MDSCommand.self, BenchCommand.self, WebhooksCommand.self,
    KeysCommand.self, AdminsCommand.self, ConfigCommand.self, HealthcheckCommand.self, ClientsCommand.self, ReceiptsCommand.self, AccountsCommand.self, LogCommand.self, PoliciesCommand.self,
]

let arguments = Array(CommandLine.arguments.dropFirst())
if arguments == ["--version"] || arguments == ["version"] {
    print("latchkey \(LatchkeyBuild.version)")
    exit(ExitCode.success)
}
guard let verb = arguments.first, !["-h", "--help", "help"].contains(verb) else {
    print(usage(commands))
    exit(arguments.isEmpty ? ExitCode.usage : ExitCode.success)
}
guard let command = commands.first(where: { $0.name == verb }) else {
    printError("latchkey: unknown command '\(verb)'\n\n" + usage(commands))
    exit(ExitCode.usage)
}
exit(command.run(Array(arguments.dropFirst())))
