// The OpenID Provider's logout confirmation (docs/oidc.md): an app signed the person
// out and asks Latchkey to end its own browser session too; that happens only when they say so.
// The page (rendered by the server, in their language) carries what to post back in data
// attributes; this posts it as JSON from the issuer's own origin and follows the answer.
const $ = (id) => document.getElementById(id);
const page = document.body.dataset;

async function answer(confirm) {
  $('logout-confirm').disabled = $('logout-stay').disabled = true;
  document.body.dataset.state = confirm ? 'signing-out' : 'staying';
  const body = { confirm };
  if (page.redirect) Object.assign(body, { client_id: page.client, post_logout_redirect_uri: page.redirect });
  if (page.state !== undefined) body.state = page.state;
  try {
    const r = await fetch('/oauth2/logout', {
      method: 'POST', credentials: 'same-origin', cache: 'no-store',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json' }, body: JSON.stringify(body),
    });
    if (!r.ok) throw new Error(String(r.status));
    const result = await r.json();
    if (result.redirectTo) { document.body.dataset.state = 'redirecting'; window.location.assign(result.redirectTo); return; }
    $('logout-message').hidden = true;
    $('logout-confirm').hidden = $('logout-stay').hidden = true;
    $('logout-done').hidden = false;
    document.body.dataset.state = 'done';
  } catch {
    $('logout-error').hidden = false;
    document.body.dataset.state = 'error';
  }
}

$('logout-confirm').addEventListener('click', () => answer(true));
$('logout-stay').addEventListener('click', () => answer(false));
