"""A request made by a page's own latchkey.js, for the browser suites (no Selenium here: the
Firefox runs use it through Marionette)."""

# An authenticated request made by the page's own latchkey.js, with the session kept under
# `storage_key` (the app's 'latchkey.session', the console's 'latchkey.admin'): those sessions are
# DPoP-bound, so their access tokens work only with proofs from the key the page holds (a copy sent
# as Bearer is refused). Answers (status, body bytes): 200 and the JSON for any success (latchkey.js
# does not tell 200 from 201 or 204, which answers `null`), else the status and the problem.
PAGE_REQUEST = """
const [method, path, body, headers, storageKey] = arguments, done = arguments[arguments.length - 1];
(async () => {
  const { Latchkey } = await import('/latchkey.js');
  const lk = new Latchkey({ storageKey });
  const answer = await lk.request(method, path, { auth: true, headers, body: body === null ? undefined : body });
  return { status: 200, body: JSON.stringify(answer) };
})().then(done, (e) => done({ status: (e && e.status) || 0,
                              body: JSON.stringify((e && e.problem) || { detail: String(e && (e.message || e)) }) }));
"""


def page_request(run_async, method, path, body=None, headers=None, storage_key='latchkey.session'):
    """`run_async`: the browser's execute-async-script (Selenium's, or Marionette's `execute_async`)."""
    r = run_async(PAGE_REQUEST, method, path, body, headers or {}, storage_key)
    return r['status'], r['body'].encode()
