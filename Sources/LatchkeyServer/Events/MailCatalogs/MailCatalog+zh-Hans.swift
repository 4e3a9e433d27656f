extension MailCatalog {
    /// 简体中文.
    static let zhHans: [Key: String] = [
        .codeFooter: "验证码将在 {minutes}后失效，且只能使用一次。如果不是您本人申请的，请忽略此邮件。",
        .signInSubject: "您的 Latchkey 登录验证码：{code}",
        .signInIntro: "您的登录验证码是：{code}",
        .recoveryCodeSubject: "您的 Latchkey 恢复验证码：{code}",
        .recoveryCodeIntro: "有人（希望是您本人）申请恢复您的账户。您的恢复验证码是：{code}",
        .verifySubject: "您的 Latchkey 验证码：{code}",
        .verifyBody: """
            您的验证码是：{code}

            请在 Latchkey 中输入以确认此地址。验证码将在 {minutes}后失效，且只能使用一次。
            如果不是您本人申请的，请忽略此邮件。
            """,
        .changedSubject: "您的 Latchkey 账户邮箱地址已更改",
        .changedBody: """
            您的 Latchkey 账户的已验证邮箱地址刚刚被替换为另一个地址。
            恢复验证码和恢复通知今后将发送到新地址。

            如果不是您本人操作，请使用通行密钥登录，重新设置地址，并检查您的会话和待处理的恢复。
            """,
        .approvalRequestedSubject: "您的 Latchkey 账户上有一项操作正在等待批准",
        .approvalRequestedBody: """
            有人请求执行：{action}（策略 {policy}）。需要 {needed} 个批准，最早可于 {date} 使用。
            如果您不希望这样，请立即阻止（无需登录）：
            {link}
            """,
        .approvalBreakGlassSubject: "您的 Latchkey 账户上使用了紧急批准",
        .approvalBreakGlassBody: """
            刚刚按照策略 {policy} 对 {action} 给予了紧急（“break glass”）批准。
            它立即生效，并与批准人的签名凭证一起记录在案。
            如果这出乎您的意料，请联系您的管理员。
            """,
        .addedSubject: "您的 Latchkey 账户添加了一个通行密钥",
        .addedBody: "您的 Latchkey 账户添加了一个通行密钥（{name}）。",
        .addedHeld: """
            它可以登录，但在 {date} 之前不能批准任何操作（付款、新设备密钥、账户更改）。
            如果不是您本人操作，请立即删除——无需登录：
            {link}
            """,
        .addedNotHeld: "如果不是您本人操作，请用您的其他通行密钥登录，删除它并检查您的会话。",
        .revokedSubject: "您的 Latchkey 账户删除了一个通行密钥",
        .revokedBody: """
            您的 Latchkey 账户删除了一个通行密钥。
            如果不是您本人操作，请用您的其他通行密钥登录，并检查您的通行密钥和会话。
            """,
        .revokedByAdminBody: """
            管理员从您的 Latchkey 账户中删除了一个通行密钥。
            如果不是您本人操作，请用您的其他通行密钥登录，并检查您的通行密钥和会话。
            """,
        .startedSubject: "您的 Latchkey 账户恢复已开始",
        .startedBody: """
            您的 Latchkey 账户恢复已开始（{how}）。
            它可以在{when}注册新的通行密钥；届时所有其他会话都将被注销，您的设备密钥将被删除。

            如果不是您本人操作，请在此之前取消——无需登录：
            {link}

            （或者登录后在横幅中取消恢复 {id}。）
            """,
        .startedByEmail: "通过邮件验证码",
        .startedByCode: "通过恢复码",
        .startedNow: "现在",
        .startedLater: " {duration}后（{date}）",
        .hoursOne: "{n} 小时", .hoursFew: "{n} 小时", .hoursOther: "{n} 小时",
        .minutesOne: "{n} 分钟", .minutesFew: "{n} 分钟", .minutesOther: "{n} 分钟",
        .secondsOne: "{n} 秒", .secondsFew: "{n} 秒", .secondsOther: "{n} 秒",
        .dateTime: "{year}年{month}月{day}日 {time} UTC",
    ]

    /// Month numbers ("12月"), for `dateTime`.
    static let zhHansMonths: [String] = ["1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12"]
}
