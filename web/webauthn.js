// The WebAuthn JSON helpers the web app (/app.js) and the admin console (/admin/admin.js) share: the
// browser's own when present (WebAuthn L3), a small fallback otherwise. An ES module with no
// dependencies, imported as './webauthn.js' by both, so it is served at /webauthn.js and at
// /admin/webauthn.js (an admin listener, LATCHKEY_ADMIN_LISTEN, serves only /admin/…).

/** base64url without padding (RFC 4648 §5), as WebAuthn's JSON encodes every byte string. */
export const b64url = {
  decode(s) {
    const b = atob(s.replace(/-/g, '+').replace(/_/g, '/') + '==='.slice((s.length + 3) % 4));
    return Uint8Array.from(b, (c) => c.charCodeAt(0)).buffer;
  },
  encode(buf) {
    let s = '';
    for (const byte of new Uint8Array(buf)) s += String.fromCharCode(byte);
    return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  },
};

/** The server's creation options JSON → `navigator.credentials.create({ publicKey })`'s argument. */
export function creationOptions(json) {
  if (PublicKeyCredential.parseCreationOptionsFromJSON) return PublicKeyCredential.parseCreationOptionsFromJSON(json);
  return {
    ...json,
    challenge: b64url.decode(json.challenge),
    user: { ...json.user, id: b64url.decode(json.user.id) },
    excludeCredentials: (json.excludeCredentials || []).map((c) => ({ ...c, id: b64url.decode(c.id) })),
  };
}

/** The server's request options JSON → `navigator.credentials.get({ publicKey })`'s argument. */
export function requestOptions(json) {
  if (PublicKeyCredential.parseRequestOptionsFromJSON) return PublicKeyCredential.parseRequestOptionsFromJSON(json);
  return {
    ...json,
    challenge: b64url.decode(json.challenge),
    allowCredentials: (json.allowCredentials || []).map((c) => ({ ...c, id: b64url.decode(c.id) })),
  };
}

/** A registration or assertion credential → the JSON the server's verify endpoints take. */
export function credentialJSON(credential) {
  if (typeof credential.toJSON === 'function') return credential.toJSON();
  const r = credential.response;
  const response = { clientDataJSON: b64url.encode(r.clientDataJSON) };
  if (r.attestationObject) {
    response.attestationObject = b64url.encode(r.attestationObject);
    response.transports = r.getTransports ? r.getTransports() : [];
  } else {
    response.authenticatorData = b64url.encode(r.authenticatorData);
    response.signature = b64url.encode(r.signature);
    if (r.userHandle) response.userHandle = b64url.encode(r.userHandle);
  }
  return {
    id: credential.id, rawId: b64url.encode(credential.rawId), type: credential.type,
    authenticatorAttachment: credential.authenticatorAttachment || undefined,
    clientExtensionResults: credential.getClientExtensionResults(), response,
  };
}
