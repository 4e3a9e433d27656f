/// The demo page at `/`: register and sign in with a passkey against this server, using the
/// browser's JSON helpers (parseCreationOptionsFromJSON / toJSON) exactly as SPEC's web clients do.
enum DemoPage {
    static let html = """
    <!doctype html>
    <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
    <title>Latchkey demo</title>
    <style>body{font:16px system-ui,sans-serif;max-width:40rem;margin:3rem auto;padding:0 1rem}
    input,button{font:inherit;padding:.4rem .6rem;margin:.2rem 0}pre{background:#f4f4f4;padding:1rem;white-space:pre-wrap}</style>
    </head><body>
    <h1>Latchkey</h1>
    <p>Create an account with a passkey, then sign in with it.</p>
    <p><label>Username <input id="username" autocomplete="username webauthn" value="alice"></label></p>
    <p><button id="register">Create account with a passkey</button>
       <button id="login">Sign in with a passkey</button></p>
    <pre id="out">Ready.</pre>
    <script>
    const out = document.getElementById('out');
    const show = (label, value) => { out.textContent = label + '\\n' + JSON.stringify(value, null, 2); };
    async function post(path, body, token) {
      const headers = {'Content-Type': 'application/json'};
      if (token) headers.Authorization = 'Bearer ' + token;
      const r = await fetch(path, {method: 'POST', headers, body: JSON.stringify(body)});
      const json = await r.json();
      if (!r.ok) throw Object.assign(new Error(json.detail || r.status), {problem: json});
      return json;
    }
    document.getElementById('register').onclick = async () => {
      try {
        const name = document.getElementById('username').value;
        const options = await post('/v1/passkeys/registration/options', {username: name, displayName: name});
        const credential = await navigator.credentials.create({publicKey: PublicKeyCredential.parseCreationOptionsFromJSON(options)});
        show('Registered', await post('/v1/passkeys/registration/verify', credential.toJSON()));
      } catch (e) { show('Registration failed', e.problem || String(e)); }
    };
    document.getElementById('login').onclick = async () => {
      try {
        const options = await post('/v1/passkeys/authentication/options', {});
        const credential = await navigator.credentials.get({publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(options)});
        show('Signed in', await post('/v1/passkeys/authentication/verify', credential.toJSON()));
      } catch (e) { show('Sign-in failed', e.problem || String(e)); }
    };
    </script>
    </body></html>
    """
}
