// The client module's story, run in a page of the server by both browser suites (test_web.py in
// Chromium, test_firefox.py in Firefox): a fresh Latchkey client (memory storage) signs up, lists
// and renames its passkey, approves and spends a step-up (a second spend is `conflict`), is refused
// a taken username with a typed LatchkeyError, is refused revoking its only passkey while it is the
// account's last way in (last_passkey), makes recovery codes, and then revokes its passkey with the
// step-up the Assurance table asks for, which ends its session. arguments[0]: a fresh username; the last
// argument: WebDriver's callback.
const resolve = arguments[arguments.length - 1];
      (async () => {
        const m = await import('/latchkey.js');
        const out = { version: m.VERSION };
        const lk = new m.Latchkey({ storage: null });
        await lk.abortConditional();
        const signed = await lk.signUp({ username: arguments[0], displayName: 'Module Tester' });
        out.signedUp = signed.user.username;
        const list = await lk.passkeys.list();
        out.passkeys = list.length;
        await lk.passkeys.rename(list[0].id, 'Firefox key');
        out.renamed = (await lk.passkeys.list())[0].name;
        const approval = await lk.stepUp({ type: 'transfer', amount: '1.00', currency: 'EUR' });
        out.consumed = !!(await lk.consumeStepUp(approval.token, approval.actionHash));
        try { await lk.consumeStepUp(approval.token, approval.actionHash); out.second = 'accepted'; } catch (e) { out.second = e.code; }
        try { await lk.signUp({ username: arguments[0] }); } catch (e) { out.taken = [e.name, e.code, e.status]; }
        out.sessions = (await lk.sessions.list()).filter((s) => s.current).length;
        // The account's last way in is kept (409 last_passkey, asked before any step-up) until it has
        // a recovery code.
        try { await lk.passkeys.revoke(list[0].id); out.lastPasskey = 'revoked'; } catch (e) { out.lastPasskey = e.code; }
        out.codes = (await lk.recovery.createCodes()).codes.length;
        const revoked = await lk.passkeys.revoke(list[0].id);
        out.sessionEnded = revoked.sessionEnded;
        out.after = lk.session;
        return out;
      })().then(resolve, (e) => resolve({ error: String(e), code: e.code }));
