// latchkey.js — the browser client for a Latchkey server (docs/api.md, also served at /openapi.json).
//
// One ES module, no dependencies, no build step. Import it from the server that runs Latchkey:
//
//   import { Latchkey, LatchkeyError } from 'https://login.example.com/latchkey.js';
//   const lk = new Latchkey({ baseURL: 'https://login.example.com' });
//   const { user } = await lk.signIn();
//
// What it does: the WebAuthn ceremonies (sign-up, sign-in by button or by autofill = conditional
// UI, adding a passkey), passkey list / rename / revoke, sessions, the step-ups docs/assurance.md
// table asks for (tried without; on 403 `step_up_required` a user-verified passkey approval of
// exactly that change, then sent again), step-up for an app's own action, recovery, email sign-in,
// the Signal API hints the server sends, and token refresh (one refresh in flight: refresh tokens
// rotate, and a reused one ends the session). Where WebCrypto and IndexedDB are at hand the session
// is DPoP-bound (RFC 9449): a non-extractable ECDSA P-256 key kept in IndexedDB signs a proof for
// the sign-in, every refresh and every authenticated call, so a token copied out of the page is
// useless without it. Every failure is a `LatchkeyError` whose `code` is
// Latchkey's own (`credential_unknown`, `step_up_required`, …) or one of the client-side codes
// below (`cancelled`, `timeout`, `network`, …).
//
// Types: latchkey.d.ts beside this file (served at /latchkey.d.ts).

/** This module's version; the server also serves it, never changing, at /latchkey/<VERSION>/latchkey.js. */
export const VERSION = '1.0.0';

// ---------------------------------------------------------------------------------------------
// Errors

/**
 * Client-side codes, beside the server's: `network` (no answer), `cancelled` (the person closed the
 * passkey prompt), `timeout` (the prompt timed out), `aborted` (the page aborted it), `invalid_state`
 * (this authenticator already holds a passkey for the account), `security` (this page's address may
 * not use passkeys for the server's rpId: see `explainOrigin`), `not_supported`,
 * `unsupported_browser`, `insecure_context`, `declined` (a step-up the page's `confirmStepUp` hook
 * refused), `vault_locked` (a key that does not open the vault: the wrong passkey, code or data), `unknown`.
 * @type {readonly string[]}
 */
export const CLIENT_CODES = Object.freeze(['network', 'cancelled', 'timeout', 'aborted', 'invalid_state', 'security',
  'not_supported', 'unsupported_browser', 'insecure_context', 'declined', 'vault_locked', 'unknown']);

/** A failure, as a value: `code` is stable (Latchkey's problem codes or `CLIENT_CODES`), `status` the HTTP status (0 when none). */
export class LatchkeyError extends Error {
  /**
   * @param {string} code
   * @param {string} message
   * @param {{status?: number, problem?: object|null, retryAfter?: number|null, cause?: unknown}} [details]
   */
  constructor(code, message, { status = 0, problem = null, retryAfter = null, cause } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'LatchkeyError';
    /** @type {string} */ this.code = code;
    /** @type {number} */ this.status = status;
    /** @type {object|null} the problem+json body, when the server sent one */ this.problem = problem;
    /** @type {number|null} seconds, from `Retry-After` on 429 */ this.retryAfter = retryAfter;
    /**
     * @type {object|null} on 409 `credential_exists` for a retried registration whose first try was
     * saved (its answer lost): the stored passkey. "Your passkey was saved — sign in with it."
     */
    this.passkey = (problem && problem.passkey) || null;
  }

  /** True for a failure the person caused by closing or ignoring the prompt (nothing to report). */
  get isCancellation() { return this.code === 'cancelled' || this.code === 'timeout' || this.code === 'aborted'; }
}

/**
 * Maps a DOMException from navigator.credentials to a LatchkeyError. `started`/`timeout` tell a
 * timeout from a cancel; `rpId` (the options') lets a SecurityError name the address that works.
 */
export function ceremonyError(error, { started = 0, timeout = 0, kind = 'get', rpId = '' } = {}) {
  if (error instanceof LatchkeyError) return error;
  const name = error && error.name;
  const msg = (error && error.message) || String(error);
  switch (name) {
    case 'NotAllowedError':
      // Browsers report "closed" and "timed out" alike; the clock tells them apart.
      if (timeout && started && Date.now() - started >= timeout - 2000) return new LatchkeyError('timeout', msg, { cause: error });
      return new LatchkeyError('cancelled', msg, { cause: error });
    case 'AbortError': return new LatchkeyError('aborted', msg, { cause: error });
    case 'InvalidStateError':
      return new LatchkeyError(kind === 'create' ? 'invalid_state' : 'unknown', msg, { cause: error });
    case 'SecurityError': {
      const why = explainOrigin(globalThis.location, rpId);
      const e = new LatchkeyError('security', why.message || msg, { cause: error });
      e.rpId = rpId || null;
      e.suggestion = why.suggestion;
      return e;
    }
    case 'NotSupportedError': return new LatchkeyError('not_supported', msg, { cause: error });
    default: return new LatchkeyError('unknown', msg, { cause: error });
  }
}

// ---------------------------------------------------------------------------------------------
// Support and the page's address

/**
 * Why passkeys cannot work at this page's address, in words (code `ok` when they can). WebAuthn
 * needs a secure context (https, or http on `localhost`), an rpId is a domain name (on
 * `http://127.0.0.1:…` the browser refuses every ceremony: open `http://localhost:…`), and the
 * page's host must be the rpId or under it (`rpId`, when known, names the address that works).
 * @param {{protocol: string, hostname: string, host: string, port?: string, pathname?: string}} [where] defaults to `location`
 * @param {string} [rpId] the server's rpId (from any options it sent)
 * @returns {{code: string, message: string, suggestion: string|null}}
 */
export function explainOrigin(where = globalThis.location, rpId = '') {
  if (!where) return { code: 'ok', message: '', suggestion: null };
  const host = where.hostname || '';
  const port = where.port ? `:${where.port}` : '';
  if (rpId && host !== rpId && !host.endsWith(`.${rpId}`)) {
    const scheme = rpId === 'localhost' ? where.protocol : 'https:';
    const suggestion = `${scheme}//${rpId}${port}`;
    return {
      code: 'security',
      message: `Passkeys for this site work at ${rpId}, not at ${host}. Open ${suggestion}${where.pathname || '/'} instead.`,
      suggestion,
    };
  }
  const ipv4 = /^\d{1,3}(\.\d{1,3}){3}$/.test(host);
  const ipv6 = host.startsWith('[') || host.includes(':');
  if (ipv4 || ipv6) {
    const local = host === '127.0.0.1' || host === '[::1]' || host === '::1';
    const suggestion = local ? `${where.protocol}//localhost${port}` : null;
    return {
      code: 'security',
      message: `Passkeys belong to a domain name, and this page was opened by its IP address (${host}), so the browser refuses them.`
        + (local ? ` Open ${suggestion}${where.pathname || '/'} instead: localhost works over plain http.` : ' Open it by its domain name.'),
      suggestion,
    };
  }
  if (where.protocol === 'http:' && host !== 'localhost' && !host.endsWith('.localhost')) {
    return {
      code: 'insecure_context',
      message: `Passkeys need a secure page: open https://${where.host}${where.pathname || '/'} (plain http works only on localhost).`,
      suggestion: `https://${where.host}`,
    };
  }
  return { code: 'ok', message: '', suggestion: null };
}

/**
 * What this browser can do. `supported` is false without WebAuthn (an old browser, a WebView that
 * hides it, or an insecure page); `problem` then says why in words.
 * @returns {Promise<{supported: boolean, conditionalGet: boolean, conditionalCreate: boolean, problem: {code: string, message: string}|null}>}
 */
export async function browserSupport() {
  const origin = explainOrigin();
  if (origin.code !== 'ok') return { supported: false, conditionalGet: false, conditionalCreate: false, problem: origin };
  const PKC = globalThis.PublicKeyCredential;
  if (!PKC || !globalThis.navigator || !navigator.credentials || (globalThis.isSecureContext === false)) {
    return {
      supported: false, conditionalGet: false, conditionalCreate: false,
      problem: {
        code: 'unsupported_browser',
        message: 'This browser does not support passkeys. Use a current Chrome, Edge, Safari or Firefox, or open the page outside the app that embeds it.',
      },
    };
  }
  let conditionalGet = false, conditionalCreate = false;
  try {
    if (PKC.getClientCapabilities) {
      const caps = await PKC.getClientCapabilities();
      conditionalGet = !!caps.conditionalGet;
      conditionalCreate = !!caps.conditionalCreate;
    }
    if (!conditionalGet && PKC.isConditionalMediationAvailable) conditionalGet = !!(await PKC.isConditionalMediationAvailable());
  } catch { /* capabilities unknown: treat as absent */ }
  return { supported: true, conditionalGet, conditionalCreate, problem: null };
}

/**
 * Whether the browser offers `mediation: "immediate"` for sign-in (the `immediateGet` client capability).
 * @returns {Promise<boolean>}
 */
export async function immediateGetAvailable() {
  try {
    const PKC = globalThis.PublicKeyCredential;
    return !!(PKC && PKC.getClientCapabilities && (await PKC.getClientCapabilities()).immediateGet);
  } catch {
    return false;
  }
}

/** An immediate sign-in refused within this many milliseconds had nothing to offer (no person acted). */
const IMMEDIATE_NOTHING_MS = 750;

// ---------------------------------------------------------------------------------------------
// WebAuthn JSON (W3C Level 3 shapes), with fallbacks for browsers without parse…FromJSON / toJSON

/** base64url without padding (RFC 4648 §5), as WebAuthn's JSON encodes every byte string. */
export const base64url = Object.freeze({
  /** @param {string} s @returns {ArrayBuffer} */
  decode(s) {
    const b = atob(String(s).replace(/-/g, '+').replace(/_/g, '/') + '==='.slice((s.length + 3) % 4));
    return Uint8Array.from(b, (c) => c.charCodeAt(0)).buffer;
  },
  /**
   * `ArrayBuffer.isView`, not `instanceof ArrayBuffer`: a buffer made in another realm (Firefox hands
   * WebCrypto's results to a script run by WebDriver that way) is no `instanceof` this realm's, and
   * read as a view it was encoded as nothing.
   * @param {ArrayBuffer|ArrayBufferView} buf @returns {string}
   */
  encode(buf) {
    const bytes = ArrayBuffer.isView(buf) ? new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength) : new Uint8Array(buf);
    let s = '';
    for (const byte of bytes) s += String.fromCharCode(byte);
    return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  },
});

// ---------------------------------------------------------------------------------------------
// DPoP (RFC 9449): proofs of possession of a key the page cannot export

const utf8 = (s) => new TextEncoder().encode(s);
const b64json = (v) => base64url.encode(utf8(JSON.stringify(v)));

/**
 * Where DPoP keys are kept: IndexedDB, which stores a CryptoKey as itself (its private half stays
 * inside WebCrypto, `extractable: false`), one key per session storage key.
 * @param {string} [name] the database's name
 */
export function indexedDBKeyStore(name = 'latchkey-dpop') {
  const open = () => new Promise((resolve, reject) => {
    const r = indexedDB.open(name, 1);
    r.onupgradeneeded = () => r.result.createObjectStore('keys');
    r.onsuccess = () => resolve(r.result);
    r.onerror = () => reject(r.error);
  });
  const run = async (mode, use) => {
    const db = await open();
    try {
      return await new Promise((resolve, reject) => {
        const tx = db.transaction('keys', mode);
        const req = use(tx.objectStore('keys'));
        tx.oncomplete = () => resolve(req.result);
        tx.onerror = () => reject(tx.error);
      });
    } finally { db.close(); }
  };
  return {
    get: (id) => run('readonly', (store) => store.get(id)),
    put: (id, value) => run('readwrite', (store) => store.put(value, id)),
    delete: (id) => run('readwrite', (store) => store.delete(id)),
  };
}

/** A key store in memory (outside a browser, or for tests): the key lives as long as the page. */
export function memoryKeyStore() {
  const m = new Map();
  return { get: async (id) => m.get(id), put: async (id, v) => { m.set(id, v); }, delete: async (id) => { m.delete(id); } };
}

/** RFC 9449 proofs with WebCrypto: `{privateKey, jwk}` keys, ES256. */
export const dpop = Object.freeze({
  /** A new ECDSA P-256 key whose private half cannot be exported → `{privateKey, jwk}` (the public JWK). */
  async generate() {
    const pair = await crypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, false, ['sign']);
    const { kty, crv, x, y } = await crypto.subtle.exportKey('jwk', pair.publicKey);
    return { privateKey: pair.privateKey, jwk: { kty, crv, x, y } };
  },
  /** RFC 7638 thumbprint of a P-256 public JWK: what the server binds tokens to (`cnf.jkt`). */
  async thumbprint(jwk) {
    return base64url.encode(await crypto.subtle.digest('SHA-256', utf8(JSON.stringify({ crv: jwk.crv, kty: jwk.kty, x: jwk.x, y: jwk.y }))));
  },
  /** `ath`: base64url of SHA-256 of the access token. */
  async ath(accessToken) { return base64url.encode(await crypto.subtle.digest('SHA-256', utf8(accessToken))); },
  /**
   * A proof (RFC 9449 §4.2) for `method` `url` (query and fragment dropped), with `ath` when an
   * access token goes with it.
   */
  async proof(key, { method, url, accessToken, nonce } = {}) {
    const claims = { jti: base64url.encode(crypto.getRandomValues(new Uint8Array(16))), htm: method, htu: String(url).split(/[?#]/)[0],
      iat: Math.floor(Date.now() / 1000) };
    if (accessToken) claims.ath = await dpop.ath(accessToken);
    if (nonce) claims.nonce = nonce;
    const input = b64json({ typ: 'dpop+jwt', alg: 'ES256', jwk: key.jwk }) + '.' + b64json(claims);
    const signature = await crypto.subtle.sign({ name: 'ECDSA', hash: 'SHA-256' }, key.privateKey, utf8(input));
    return input + '.' + base64url.encode(signature);
  },
});

/** The server's PublicKeyCredentialCreationOptionsJSON → the `publicKey` argument of `navigator.credentials.create`. */
export function parseCreationOptions(json) {
  const PKC = globalThis.PublicKeyCredential;
  if (PKC && PKC.parseCreationOptionsFromJSON) return PKC.parseCreationOptionsFromJSON(json);
  return {
    ...json,
    challenge: base64url.decode(json.challenge),
    user: { ...json.user, id: base64url.decode(json.user.id) },
    excludeCredentials: (json.excludeCredentials || []).map((c) => ({ ...c, id: base64url.decode(c.id) })),
  };
}

/** The server's PublicKeyCredentialRequestOptionsJSON → the `publicKey` argument of `navigator.credentials.get`. */
export function parseRequestOptions(json) {
  const PKC = globalThis.PublicKeyCredential;
  if (PKC && PKC.parseRequestOptionsFromJSON) return PKC.parseRequestOptionsFromJSON(json);
  return {
    ...json,
    challenge: base64url.decode(json.challenge),
    allowCredentials: (json.allowCredentials || []).map((c) => ({ ...c, id: base64url.decode(c.id) })),
  };
}

/** A PublicKeyCredential → RegistrationResponseJSON / AuthenticationResponseJSON (what the verify endpoints take). */
export function credentialToJSON(credential) {
  if (typeof credential.toJSON === 'function') {
    try { return credential.toJSON(); } catch { /* some engines throw for extension results: fall through */ }
  }
  const r = credential.response;
  const response = { clientDataJSON: base64url.encode(r.clientDataJSON) };
  if (r.attestationObject) {
    response.attestationObject = base64url.encode(r.attestationObject);
    response.transports = r.getTransports ? r.getTransports() : [];
  } else {
    response.authenticatorData = base64url.encode(r.authenticatorData);
    response.signature = base64url.encode(r.signature);
    if (r.userHandle) response.userHandle = base64url.encode(r.userHandle);
  }
  return {
    id: credential.id, rawId: base64url.encode(credential.rawId), type: credential.type,
    authenticatorAttachment: credential.authenticatorAttachment || undefined,
    clientExtensionResults: credential.getClientExtensionResults ? credential.getClientExtensionResults() : {}, response,
  };
}

/** The response JSON as it may go to the server: a PRF output (`prf.results`) never leaves the browser. */
export function withoutPRFResults(json) {
  const results = json && json.clientExtensionResults;
  if (!results || !results.prf || !results.prf.results) return json;
  const { results: _dropped, ...prf } = results.prf;
  return { ...json, clientExtensionResults: { ...results, prf } };
}

/**
 * Runs `navigator.credentials.create` for the server's options JSON and returns the response JSON.
 * @param {object} optionsJSON
 * @param {{signal?: AbortSignal, mediation?: 'conditional'}} [opts]
 */
export async function startRegistration(optionsJSON, { signal, mediation } = {}) {
  const started = Date.now();
  try {
    const publicKey = parseCreationOptions(optionsJSON);
    const credential = await navigator.credentials.create({ publicKey, signal, ...(mediation ? { mediation } : {}) });
    if (!credential) throw new LatchkeyError('cancelled', 'No passkey was created.');
    return withoutPRFResults(credentialToJSON(credential));
  } catch (e) {
    throw ceremonyError(e, { started, timeout: optionsJSON.timeout || 0, kind: 'create', rpId: (optionsJSON.rp && optionsJSON.rp.id) || '' });
  }
}

/**
 * Runs `navigator.credentials.get` for the server's options JSON and returns the response JSON.
 * @param {object} optionsJSON
 * @param {{signal?: AbortSignal, mediation?: 'conditional'|'immediate'|'optional'|'required'}} [opts]
 */
export async function startAuthentication(optionsJSON, { signal, mediation } = {}) {
  const started = Date.now();
  try {
    const publicKey = parseRequestOptions(optionsJSON);
    const credential = await navigator.credentials.get({ publicKey, signal, ...(mediation ? { mediation } : {}) });
    if (!credential) throw new LatchkeyError('cancelled', 'No passkey was chosen.');
    return withoutPRFResults(credentialToJSON(credential));
  } catch (e) {
    throw ceremonyError(e, { started, timeout: mediation === 'conditional' ? 0 : (optionsJSON.timeout || 0), kind: 'get', rpId: optionsJSON.rpId || '' });
  }
}

// ---------------------------------------------------------------------------------------------
// Signal API (docs/api.md, Signals)

/** The three WebAuthn Signal API methods the server may ask for. */
export const SIGNAL_METHODS = Object.freeze(['signalUnknownCredential', 'signalAllAcceptedCredentials', 'signalCurrentUserDetails']);

/**
 * Hands one `{method, options}` from the server to `PublicKeyCredential[method]` where the browser
 * has it. Never throws: a provider that refuses is not the person's problem.
 * @returns {Promise<boolean>} whether the browser took it
 */
export async function passSignal(signal) {
  try {
    if (!signal || !SIGNAL_METHODS.includes(signal.method) || typeof signal.options !== 'object' || !signal.options) return false;
    const PKC = globalThis.PublicKeyCredential;
    if (!PKC || typeof PKC[signal.method] !== 'function') return false;
    await PKC[signal.method](signal.options);
    return true;
  } catch { return false; }
}

/** Passes every signal in a server answer (`signals` on success, `signal` in a problem). */
export function passSignals(json) {
  if (!json || typeof json !== 'object') return;
  if (Array.isArray(json.signals)) json.signals.forEach((s) => { passSignal(s); });
  if (json.signal) passSignal(json.signal);
}

// ---------------------------------------------------------------------------------------------
// The client

/** In-memory storage, for when sessionStorage is missing or refused (private mode). */
function memoryStorage() {
  const m = new Map();
  return { getItem: (k) => (m.has(k) ? m.get(k) : null), setItem: (k, v) => { m.set(k, String(v)); }, removeItem: (k) => { m.delete(k); } };
}

function defaultStorage() {
  try { const s = globalThis.sessionStorage; s.getItem('latchkey.probe'); return s; } catch { return memoryStorage(); }
}

/** The action a passkey step-up approves for each gated change (docs/assurance.md). */
export const actions = Object.freeze({
  addPasskey: () => ({ type: 'latchkey.passkey.add' }),
  revokePasskey: (credentialId) => ({ type: 'latchkey.passkey.revoke', credentialId }),
  changeEmail: (email) => ({ type: 'latchkey.email.change', email }),
  createRecoveryCodes: () => ({ type: 'latchkey.recovery-codes.create' }),
  vaultWrap: (credentialId) => ({ type: 'latchkey.vault.wrap', credentialId }),
  vaultRecovery: () => ({ type: 'latchkey.vault.recovery' }),
  admin: (method, path, body) => ({ type: 'latchkey.admin', method, path, body: body === undefined ? null : body }),
  /** A CIBA request as `GET /v1/ciba/requests` lists it: what approving it binds (docs/oidc.md). */
  approveCIBA: (request) => ({
    type: 'latchkey.ciba.approve', authReqId: request.authReqId, clientId: request.client.id,
    bindingMessage: request.bindingMessage == null ? null : request.bindingMessage,
    authorizationDetails: request.authorizationDetails == null ? null : request.authorizationDetails,
  }),
});

/**
 * A Latchkey client for one server. Keeps the session (`{user, tokens}`) in `storage`
 * (sessionStorage by default: this tab only).
 */
export class Latchkey {
  /**
   * @param {object} [config]
   * @param {string} [config.baseURL] the Latchkey server ('' = this page's origin)
   * @param {Storage|null} [config.storage] where the session is kept (null: memory only)
   * @param {string} [config.storageKey]
   * @param {(info: {action: object, reason: string}) => (boolean|Promise<boolean>)} [config.confirmStepUp]
   *        called before a step-up prompt; return false to cancel (a `declined` error)
   * @param {(reason: LatchkeyError|null) => void} [config.onSessionEnded] the session ended (refresh refused, revoked, signed out)
   * @param {typeof fetch} [config.fetch]
   * @param {string} [config.language] a BCP 47 tag sent as Accept-Language (the server mails the account in the language it last signed in with)
   * @param {boolean|'auto'} [config.dpop] bind the session to a DPoP key ('auto': where WebCrypto and IndexedDB are at hand)
   * @param {{get: Function, put: Function, delete: Function}} [config.dpopKeyStore] where the key is kept (IndexedDB by default)
   */
  constructor({ baseURL = '', storage, storageKey = 'latchkey.session', confirmStepUp, onSessionEnded, fetch: fetchImpl, language,
    dpop: useDPoP = 'auto', dpopKeyStore } = {}) {
    const webCrypto = typeof crypto !== 'undefined' && !!crypto.subtle;
    const idb = typeof indexedDB !== 'undefined';
    /** Whether sign-ins, refreshes and calls carry DPoP proofs. */
    this.dpopEnabled = webCrypto && (useDPoP === true || (useDPoP === 'auto' && (idb || !!dpopKeyStore)));
    this._dpopKeys = dpopKeyStore || (idb ? indexedDBKeyStore() : memoryKeyStore());
    this._dpopKey = null;
    /** @type {string|undefined} */
    this.language = language;
    this.baseURL = String(baseURL).replace(/\/+$/, '');
    this.storage = storage === null ? memoryStorage() : (storage || defaultStorage());
    this.storageKey = storageKey;
    this.confirmStepUp = confirmStepUp || null;
    this.onSessionEnded = onSessionEnded || null;
    this._fetch = fetchImpl || ((url, init) => fetch(url, init));
    this._refreshing = null;
    this._conditional = null;
    /** @type {{user: object, tokens: object, method?: string}|null} */
    this.session = this._load();
    this.passkeys = new PasskeyAPI(this);
    this.sessions = new SessionAPI(this);
    this.recovery = new RecoveryAPI(this);
    this.email = new EmailAPI(this);
    this.vault = new VaultAPI(this);
    this.ciba = new CIBAAPI(this);
  }

  /** The signed-in user, or null. */
  get user() { return this.session ? this.session.user : null; }

  // --- HTTP ------------------------------------------------------------------------------------

  /**
   * One call to the API. `auth: true` sends the session's access token (renewed once through
   * /v1/token on a 401), `token` a given bearer (a recovery or step-up token), `ticket` an enrolment
   * ticket. Returns the JSON (null for 204); throws a LatchkeyError for anything not 2xx.
   */
  async request(method, path, { body, auth = false, token = null, ticket = null, headers = {}, retry = true, proof = false, bound = false } = {}) {
    const h = { Accept: 'application/json, application/problem+json', ...(this.language ? { 'Accept-Language': this.language } : {}), ...headers };
    if (body !== undefined) h['Content-Type'] = 'application/json';
    const bearer = token || (auth && this.session ? this.session.tokens.access_token : null);
    // A DPoP-bound access token goes as `Authorization: DPoP` with a proof whose `ath` is its hash;
    // `proof`: a request that issues tokens (a verify, a refresh) carries a proof to bind them.
    const boundToken = !!bearer && (bound || (auth && !token && !!this.session && this.session.tokens.token_type === 'DPoP'));
    if (bearer) h.Authorization = `${boundToken ? 'DPoP' : 'Bearer'} ${bearer}`;
    if (ticket) h.Authorization = `Ticket ${ticket}`;
    if (boundToken || (proof && this.dpopEnabled)) {
      h.DPoP = await dpop.proof(await this.dpopKey(), { method, url: this._absolute(path), accessToken: boundToken ? bearer : undefined });
    }
    let response;
    try {
      response = await this._fetch(this.baseURL + path, {
        method, headers: h, cache: 'no-store', credentials: 'same-origin',
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (e) {
      throw new LatchkeyError('network', 'Cannot reach the server.', { cause: e });
    }
    if (response.status === 401 && auth && !token && retry && this.session && this.session.tokens.refresh_token) {
      if (await this.refresh()) return this.request(method, path, { body, auth, headers, retry: false });
    }
    if (response.status === 204) return null;
    let json = null;
    try { const text = await response.text(); json = text ? JSON.parse(text) : null; } catch { json = null; }
    passSignals(json);
    if (!response.ok) {
      const problem = json && typeof json === 'object' ? json : null;
      const code = (problem && problem.code) || (response.status >= 500 ? 'internal_error' : response.status === 404 ? 'not_found' : 'invalid_request');
      const ra = Number(response.headers.get('Retry-After'));
      const error = new LatchkeyError(code, (problem && (problem.detail || problem.title)) || `HTTP ${response.status}`,
        { status: response.status, problem, retryAfter: Number.isFinite(ra) && ra > 0 ? ra : null });
      if (response.status === 401 && auth && !token && this.session) this._end(error);
      throw error;
    }
    return json;
  }

  /** Rotates the refresh token; one rotation in flight however many calls hit 401 together. */
  refresh() {
    if (!this._refreshing) {
      this._refreshing = (async () => {
        const rt = this.session && this.session.tokens.refresh_token;
        if (!rt) return false;
        try {
          const tokens = await this.request('POST', '/v1/token', { body: { grant_type: 'refresh_token', refresh_token: rt }, proof: true });
          this.session = { ...this.session, tokens };
          this._save();
          return true;
        } catch (e) {
          this._end(e);
          return false;
        } finally { this._refreshing = null; }
      })();
    }
    return this._refreshing;
  }

  /** This client's DPoP key (`{privateKey, jwk}`), made and stored on first use. */
  async dpopKey() {
    if (this._dpopKey) return this._dpopKey;
    let key = null;
    try { key = await this._dpopKeys.get(this.storageKey); } catch { key = null; }
    if (!key || !key.privateKey || !key.jwk) {
      key = await dpop.generate();
      try { await this._dpopKeys.put(this.storageKey, key); } catch { /* this page's lifetime only */ }
    }
    this._dpopKey = key;
    return key;
  }

  /** The thumbprint of this client's DPoP key (the `cnf.jkt` of its bound tokens). */
  async dpopThumbprint() { return dpop.thumbprint((await this.dpopKey()).jwk); }

  _absolute(path) {
    const base = this.baseURL || (globalThis.location ? globalThis.location.origin : '');
    return base + path;
  }

  _load() {
    try {
      const s = JSON.parse(this.storage.getItem(this.storageKey) || 'null');
      if (s && s.user && s.tokens && s.tokens.access_token) return s;
    } catch { /* ignore */ }
    return null;
  }
  _save() { try { this.storage.setItem(this.storageKey, JSON.stringify(this.session)); } catch { /* memory only */ } }
  _end(reason) {
    const had = !!this.session;
    this.session = null;
    try { this.storage.removeItem(this.storageKey); } catch { /* ignore */ }
    if (had && this.onSessionEnded) { try { this.onSessionEnded(reason || null); } catch { /* the page's problem */ } }
  }
  /** Starts a session from a verify answer (`{user, tokens}`). */
  _start(result, method) {
    this.session = { user: result.user, tokens: result.tokens, method };
    this._save();
    return result;
  }

  // --- Ceremonies ------------------------------------------------------------------------------

  /** Aborts a pending autofill request and waits until the browser let go of it (one request at a time). */
  async abortConditional() {
    const entry = this._conditional;
    if (!entry) return;
    this._conditional = null;
    entry.controller.abort();
    await entry.settled;
  }

  async _modal(kind, optionsJSON) {
    await this.abortConditional();
    return kind === 'create' ? startRegistration(optionsJSON) : startAuthentication(optionsJSON);
  }

  /**
   * Sign-in with `mediation: "immediate"` where the browser offers it (WebAuthn client capability
   * `immediateGet`): the passkeys the browser can offer at once, in its own small prompt, and
   * otherwise the modal. The browser answers `NotAllowedError` both when it has nothing to offer
   * (at once, with no prompt) and when the person dismisses its prompt; an answer faster than a
   * person can act is the first, and only then does the modal follow. A browser that reports the
   * capability but refuses the value (a `TypeError`: some report it before they take it) gets the
   * modal too.
   */
  async _signInPrompt(optionsJSON) {
    if (!(await immediateGetAvailable())) return this._modal('get', optionsJSON);
    await this.abortConditional();
    const asked = Date.now();
    try {
      return await startAuthentication(optionsJSON, { mediation: 'immediate' });
    } catch (e) {
      const refusedValue = e instanceof LatchkeyError && e.cause instanceof TypeError;
      const nothingToOffer = e instanceof LatchkeyError && e.code === 'cancelled' && Date.now() - asked <= IMMEDIATE_NOTHING_MS;
      if (!refusedValue && !nothingToOffer) throw e;
      return this._modal('get', optionsJSON);
    }
  }

  /**
   * Sends a registration response. When its answer is lost (no answer, or a 503 while the database
   * fails over) the same response goes again, twice at most: a try that had been saved is then
   * answered 409 `credential_exists` with the stored `passkey` (a LatchkeyError whose `passkey` is
   * set: the passkey exists, sign in with it), one that had not is answered as the first would have been.
   */
  async verifyRegistration(credential) {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.request('POST', '/v1/passkeys/registration/verify', { body: credential, proof: true });
      } catch (e) {
        if (!(e instanceof LatchkeyError) || attempt >= 2 || !(e.code === 'network' || e.status === 503)) throw e;
        await new Promise((resolve) => setTimeout(resolve, 1000 * (attempt + 1)));
      }
    }
  }

  /**
   * A new account with a passkey. → `{user, passkey, tokens}` and a started session.
   * @param {{username: string, displayName?: string}} who
   */
  async signUp({ username, displayName } = {}) {
    const options = await this.request('POST', '/v1/passkeys/registration/options', { body: { username, displayName: displayName || username } });
    const credential = await this._modal('create', options);
    return this._start(await this.verifyRegistration(credential), 'signup');
  }

  /**
   * Sign in with the button: a discoverable passkey, or the named user's.
   * @param {{username?: string, userVerification?: 'required'|'preferred'|'discouraged'}} [opts]
   */
  async signIn({ username, userVerification } = {}) {
    const options = await this.request('POST', '/v1/passkeys/authentication/options', { body: username ? { username } : {} });
    if (userVerification) options.userVerification = userVerification;
    const credential = await this._signInPrompt(options);
    return this._start(await this.request('POST', '/v1/passkeys/authentication/verify', { body: credential, proof: true }), 'passkey');
  }

  /**
   * Autofill sign-in (conditional UI): resolves with `{user, passkey, tokens}` when the person picks a
   * passkey in an `<input autocomplete="username webauthn">`'s suggestions; resolves `null` when it
   * ends without a choice, is aborted (`abortConditional`, or any modal ceremony of this client), or
   * the browser has no conditional UI. Rejects for server refusals (say, `credential_unknown`).
   */
  async signInWithAutofill() {
    await this.abortConditional();
    const support = await browserSupport();
    if (!support.supported || !support.conditionalGet) return null;
    const controller = new AbortController();
    let settle;
    const entry = { controller, settled: new Promise((r) => { settle = r; }) };
    this._conditional = entry;
    try {
      const options = await this.request('POST', '/v1/passkeys/authentication/options', { body: {} });
      if (controller.signal.aborted) return null;
      const credential = await startAuthentication(options, { mediation: 'conditional', signal: controller.signal });
      if (this._conditional !== entry) return null;
      this._conditional = null;
      return this._start(await this.request('POST', '/v1/passkeys/authentication/verify', { body: credential, proof: true }), 'autofill');
    } catch (e) {
      if (controller.signal.aborted || this._conditional !== entry) return null;
      if (e instanceof LatchkeyError && e.isCancellation) return null;
      throw e;
    } finally {
      if (this._conditional === entry) this._conditional = null;
      settle();
    }
  }

  /** True while an autofill request is pending. */
  get autofillPending() { return !!this._conditional; }

  /** Ends the session on the server (refresh-token family revoked) and here. */
  async signOut() {
    const token = this.session && this.session.tokens.access_token;
    const had = this.session;
    this.session = null;  // signed out here at once; the server is told after
    try { this.storage.removeItem(this.storageKey); } catch { /* ignore */ }
    const bound = !!had && had.tokens.token_type === 'DPoP';
    if (had && token) { try { await this.request('POST', '/v1/logout', { token, bound }); } catch { /* signed out here anyway */ } }
  }

  /** Forgets the session here without telling the server (it ended there already). */
  forget() { this._end(null); }

  // --- Step-up ---------------------------------------------------------------------------------

  /**
   * A user-verified passkey approval of exactly `action` (docs/step-up.md). → `{token, actionHash,
   * receiptId, expiresIn}`; `token` goes as `Latchkey-Step-Up` (Latchkey's own changes) or to your
   * backend, which spends it at `POST /v1/step-up/consume`.
   */
  async stepUp(action) {
    const challenge = await this.request('POST', '/v1/step-up/challenges', { auth: true, body: { method: 'passkey', action } });
    const credential = await this._modal('get', challenge.publicKey);
    const r = await this.request('POST', '/v1/step-up/verify', { auth: true, body: { challengeId: challenge.challengeId, credential } });
    return { token: r.access_token, actionHash: r.actionHash, receiptId: r.receiptId, expiresIn: r.expires_in };
  }

  /** What a backend does with a step-up token: spend it on the action it approved (single use). */
  consumeStepUp(token, actionHash) {
    return this.request('POST', '/v1/step-up/consume', { token, body: { actionHash } });
  }

  /**
   * Sends a change; when the server answers 403 `step_up_required`, asks `confirmStepUp` (if set),
   * approves `action` with a passkey and sends the change again with `Latchkey-Step-Up`.
   * @param {object} action
   * @param {(headers: Record<string,string>) => Promise<any>} send
   * @param {string} [reason] one sentence the page may show
   */
  async withStepUp(action, send, reason = '') {
    try { return await send({}); } catch (e) {
      if (!(e instanceof LatchkeyError) || e.code !== 'step_up_required') throw e;
    }
    if (this.confirmStepUp && !(await this.confirmStepUp({ action, reason }))) {
      throw new LatchkeyError('declined', 'The approval was declined; nothing changed.');
    }
    const { token } = await this.stepUp(action);
    return send({ 'Latchkey-Step-Up': token });
  }

  /** GET /v1/sign-in/methods → `{emailSignIn: boolean, …}`. */
  methods() { return this.request('GET', '/v1/sign-in/methods'); }
}

class PasskeyAPI {
  constructor(lk) { this.lk = lk; }
  /** → the passkeys (each with `heldUntil` while held). */
  async list() { return ((await this.lk.request('GET', '/v1/passkeys', { auth: true })) || {}).passkeys || []; }
  /** Renames one (allowed in any session). */
  rename(id, name) { return this.lk.request('PATCH', `/v1/passkeys/${encodeURIComponent(id)}`, { auth: true, body: { name } }); }
  /**
   * Revokes one: a passkey session needs a step-up `latchkey.passkey.revoke` for that id (done here);
   * an email session is refused (`step_up_required` after its own step-up attempt fails). Revoking the
   * passkey this session began with ends the session: `{sessionEnded: true}`.
   */
  async revoke(id, { reason } = {}) {
    const current = await this.lk.sessions.current().catch(() => null);
    const r = await this.lk.withStepUp(actions.revokePasskey(id),
      (headers) => this.lk.request('DELETE', `/v1/passkeys/${encodeURIComponent(id)}`, { auth: true, headers }), reason);
    const sessionEnded = !!(current && current.credentialId === id);
    if (sessionEnded) this.lk.forget();
    return { ...(r || {}), sessionEnded };
  }
  /**
   * Adds a passkey to the signed-in account (step-up `latchkey.passkey.add` when the session needs
   * one). `mediation: 'conditional'` asks quietly (automatic passkey upgrade) and never steps up.
   * → `{user, passkey, tokens}`.
   */
  async add({ mediation, reason, signal } = {}) {
    const body = mediation === 'conditional' ? { mediation } : {};
    const options = mediation === 'conditional'
      ? await this.lk.request('POST', '/v1/passkeys/registration/options', { auth: true, body })
      : await this.lk.withStepUp(actions.addPasskey(),
        (headers) => this.lk.request('POST', '/v1/passkeys/registration/options', { auth: true, body, headers }), reason);
    const credential = mediation === 'conditional'
      ? await startRegistration(options, { mediation, signal })
      : await this.lk._modal('create', options);
    return this.lk.verifyRegistration(credential);
  }
  /** An account's first passkey from an app backend's enrolment ticket. → `{user, passkey, tokens}`, session started. */
  async enrolWithTicket(ticket, { userVerification } = {}) {
    const options = await this.lk.request('POST', '/v1/passkeys/registration/options', { ticket, body: {} });
    if (userVerification) options.authenticatorSelection = { ...(options.authenticatorSelection || {}), userVerification };
    const credential = await this.lk._modal('create', options);
    return this.lk._start(await this.lk.verifyRegistration(credential), 'ticket');
  }
}

class SessionAPI {
  constructor(lk) { this.lk = lk; }
  /** → the account's sessions; the one of this client's token has `current: true`. */
  async list() { return ((await this.lk.request('GET', '/v1/sessions', { auth: true })) || {}).sessions || []; }
  /** The session this client is in. */
  async current() { return (await this.list()).find((s) => s.current) || null; }
  /** Ends one; ending the current one signs out here too. → `{current: boolean}`. */
  async end(id) {
    const all = await this.list().catch(() => []);
    await this.lk.request('DELETE', `/v1/sessions/${encodeURIComponent(id)}`, { auth: true, retry: false });
    const current = all.some((s) => s.id === id && s.current);
    if (current) this.lk.forget();
    return { current };
  }
}

class RecoveryAPI {
  constructor(lk) { this.lk = lk; }
  /** → `{email, recoveryCodesLeft, pendingRecoveries}` for the signed-in account. */
  status() { return this.lk.request('GET', '/v1/account/recovery', { auth: true, retry: false }); }
  /** Mails a recovery code: `{username}` or `{email}` → `{challengeId, expiresAt}` (always, whether or not the account exists). */
  start(who) { return this.lk.request('POST', '/v1/recovery/challenges', { body: who }); }
  /** The mailed code → `{recoveryToken, notBefore, recoveryId, expiresIn}`. */
  verifyCode(challengeId, code) { return this.lk.request('POST', '/v1/recovery/verify', { body: { challengeId, code } }); }
  /** A written-down recovery code → the same as `verifyCode`. */
  useRecoveryCode(username, recoveryCode) { return this.lk.request('POST', '/v1/recovery/verify', { body: { username, recoveryCode } }); }
  /**
   * Finishes a recovery: a new passkey under the recovery token (every other session and device key
   * is then signed out). `mediation: 'conditional'` tries quietly. → `{user, passkey, tokens}`, session started.
   */
  async createPasskey(recoveryToken, { mediation, signal } = {}) {
    const options = await this.lk.request('POST', '/v1/passkeys/registration/options', { token: recoveryToken, body: mediation ? { mediation } : {} });
    const credential = mediation ? await startRegistration(options, { mediation, signal }) : await this.lk._modal('create', options);
    return this.lk._start(await this.lk.verifyRegistration(credential), 'recovery');
  }
  /** Cancels a pending recovery of the signed-in account. */
  cancel(recoveryId) { return this.lk.request('DELETE', `/v1/recovery/${encodeURIComponent(recoveryId)}`, { auth: true }); }
  /** Uses a mailed cancel link's token (`/?cancel=…`; no session needed). */
  useCancelLink(cancelToken) { return this.lk.request('POST', '/v1/recovery/cancel', { body: { cancelToken } }); }
  /** New recovery codes (step-up `latchkey.recovery-codes.create`, always) → `{codes}`. */
  async createCodes() {
    const { token } = await this.lk.stepUp(actions.createRecoveryCodes());
    return this.lk.request('POST', '/v1/recovery-codes', { auth: true, body: {}, headers: { 'Latchkey-Step-Up': token } });
  }
}

class EmailAPI {
  constructor(lk) { this.lk = lk; }
  /** Email sign-in, step 1: → `{challengeId, expiresAt}` (202 whatever the address). */
  startSignIn(email) { return this.lk.request('POST', '/v1/email/challenges', { body: { email } }); }
  /** Email sign-in, step 2 → `{user, tokens}`, session started (method `email`). */
  async finishSignIn(challengeId, code) {
    return this.lk._start(await this.lk.request('POST', '/v1/email/verify', { body: { challengeId, code }, proof: true }), 'email');
  }
  /** Sets or replaces the verified address (step-up `latchkey.email.change` when the account has a passkey) → `{challengeId, expiresAt}`. */
  setAddress(email, { reason } = {}) {
    return this.lk.withStepUp(actions.changeEmail(email),
      (headers) => this.lk.request('PUT', '/v1/account/email', { auth: true, body: { email }, headers }), reason);
  }
  /** The mailed code → `{email, verified: true}`. */
  verifyAddress(challengeId, code) { return this.lk.request('POST', '/v1/account/email/verify', { auth: true, body: { challengeId, code } }); }
}

/**
 * Requests a service made on the backchannel (CIBA, docs/oidc.md): a browser approves only those
 * whose client's `cibaApprover` is `passkey`, with a passkey step-up for exactly that request.
 */
class CIBAAPI {
  constructor(lk) { this.lk = lk; }
  /** → the account's pending requests (`display` in the client's language), oldest first. */
  async list() { return ((await this.lk.request('GET', '/v1/ciba/requests', { auth: true })) || {}).requests || []; }
  /** Whether this browser can approve `request` (its client admits a passkey). */
  approvable(request) { return !!(request && request.client && request.client.cibaApprover === 'passkey'); }
  /** A passkey step-up for `actions.approveCIBA(request)`, then the approval. → `{receiptId}`. */
  async approve(request) {
    const { token, receiptId } = await this.lk.stepUp(actions.approveCIBA(request));
    await this.lk.request('POST', `/v1/ciba/requests/${encodeURIComponent(request.authReqId)}/approve`,
      { auth: true, headers: { 'Latchkey-Step-Up': token } });
    return { receiptId };
  }
  /** Denies it (no step-up). */
  deny(authReqId) { return this.lk.request('POST', `/v1/ciba/requests/${encodeURIComponent(authReqId)}/deny`, { auth: true }); }
}

// ---------------------------------------------------------------------------------------------
// The vault (docs/vault.md): a data key the server never sees, wrapped in the browser under a key
// each passkey's PRF output derives, and under the vault's own recovery key. Latchkey stores the
// salt and the ciphertext only.

const VAULT_LABEL = 'latchkey vault v1';
const VAULT_RECOVERY_LABEL = 'latchkey vault recovery v1';
const BASE32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

/** @param {ArrayBuffer|ArrayBufferView|string} b bytes, or base64url @returns {Uint8Array} */
function bytesOf(b) {
  if (typeof b === 'string') return new Uint8Array(base64url.decode(b));
  if (b instanceof ArrayBuffer) return new Uint8Array(b);
  return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
}

function concat(...parts) {
  const all = parts.map((p) => (typeof p === 'string' ? new TextEncoder().encode(p) : bytesOf(p)));
  const out = new Uint8Array(all.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of all) { out.set(p, at); at += p.length; }
  return out;
}

function subtle() {
  const s = globalThis.crypto && globalThis.crypto.subtle;
  if (!s) throw new LatchkeyError('not_supported', 'This page cannot use Web Crypto (it needs a secure context: https or localhost).');
  return s;
}

/** The vault's byte formats, with no server and no passkey: what `lk.vault` uses, exported for tests and other clients. */
export const vaultCrypto = Object.freeze({
  /** HKDF-SHA-256(ikm, salt = empty, info), 32 bytes. */
  async hkdf(ikm, info) {
    const key = await subtle().importKey('raw', bytesOf(ikm), 'HKDF', false, ['deriveBits']);
    return new Uint8Array(await subtle().deriveBits({ name: 'HKDF', hash: 'SHA-256', salt: new Uint8Array(0), info: bytesOf(info) }, key, 256));
  },
  /**
   * KWK = HKDF(PRF output, info "latchkey vault v1" ‖ user handle ‖ credential id): the id's bytes
   * (a string is base64url, as everywhere here, never its text).
   */
  keyWrappingKey(prfOutput, userHandle, credentialId) { return this.hkdf(prfOutput, concat(VAULT_LABEL, bytesOf(userHandle), bytesOf(credentialId))); },
  /** The recovery wrap's key: HKDF(vault recovery key, info "latchkey vault recovery v1"). */
  recoveryWrappingKey(recoveryKey) { return this.hkdf(recoveryKey, concat(VAULT_RECOVERY_LABEL)); },
  /** AES-256-GCM → IV ‖ ciphertext ‖ tag (the IV random unless given). */
  async seal(plaintext, key, aad, iv = globalThis.crypto.getRandomValues(new Uint8Array(12))) {
    const k = await subtle().importKey('raw', bytesOf(key), 'AES-GCM', false, ['encrypt']);
    const sealed = await subtle().encrypt({ name: 'AES-GCM', iv, additionalData: bytesOf(aad), tagLength: 128 }, k, bytesOf(plaintext));
    return concat(iv, sealed);
  },
  /** IV ‖ ciphertext ‖ tag → the plaintext; a changed byte, key or AAD is a `vault_locked` error. */
  async open(sealed, key, aad) {
    const s = bytesOf(sealed);
    const k = await subtle().importKey('raw', bytesOf(key), 'AES-GCM', false, ['decrypt']);
    try {
      return new Uint8Array(await subtle().decrypt({ name: 'AES-GCM', iv: s.slice(0, 12), additionalData: bytesOf(aad), tagLength: 128 }, k, s.slice(12)));
    } catch (e) {
      throw new LatchkeyError('vault_locked', 'This key does not open the vault.', { cause: e });
    }
  },
  /** `wrappedKey` for one passkey: base64url(IV ‖ AES-256-GCM(data key, AAD "latchkey vault v1" ‖ credential id) ‖ tag). */
  async wrapForPasskey(dataKey, prfOutput, userHandle, credentialId, iv) {
    const kwk = await this.keyWrappingKey(prfOutput, userHandle, credentialId);
    return base64url.encode(await this.seal(dataKey, kwk, concat(VAULT_LABEL, bytesOf(credentialId)), iv));
  },
  async unwrapForPasskey(wrappedKey, prfOutput, userHandle, credentialId) {
    const kwk = await this.keyWrappingKey(prfOutput, userHandle, credentialId);
    return this.open(wrappedKey, kwk, concat(VAULT_LABEL, bytesOf(credentialId)));
  },
  /** `recovery.wrappedKey`: the same layout under the recovery key's wrapping key, AAD "latchkey vault recovery v1". */
  async wrapForRecovery(dataKey, recoveryKey, iv) {
    return base64url.encode(await this.seal(dataKey, await this.recoveryWrappingKey(recoveryKey), concat(VAULT_RECOVERY_LABEL), iv));
  },
  async unwrapForRecovery(wrappedKey, recoveryKey) {
    return this.open(wrappedKey, await this.recoveryWrappingKey(recoveryKey), concat(VAULT_RECOVERY_LABEL));
  },
  /** The vault recovery key as the person writes it down: 52 characters of base32 (RFC 4648, no padding). */
  recoveryCode(recoveryKey) {
    const b = bytesOf(recoveryKey);
    if (b.length !== 32) throw new LatchkeyError('invalid_request', 'A vault recovery key is 32 bytes.');
    let bits = 0, value = 0, out = '';
    for (const byte of b) {
      value = (value << 8) | byte; bits += 8;
      while (bits >= 5) { out += BASE32[(value >>> (bits - 5)) & 31]; bits -= 5; }
    }
    if (bits > 0) out += BASE32[(value << (5 - bits)) & 31];
    return out;
  },
  /** The written-down code back to the key; spaces, dashes and case are forgiven, a wrong character is not. */
  parseRecoveryCode(code) {
    const text = String(code).toUpperCase().replace(/[\s-]/g, '');
    if (text.length !== 52 || /[^A-Z2-7]/.test(text)) throw new LatchkeyError('invalid_request', 'A vault recovery key is 52 letters and digits.');
    const out = new Uint8Array(32);
    let bits = 0, value = 0, at = 0;
    for (const c of text) {
      value = ((value << 5) | BASE32.indexOf(c)) & 0xffff; bits += 5;
      if (bits >= 8) { out[at++] = (value >>> (bits - 8)) & 0xff; bits -= 8; }
    }
    if ((value & ((1 << bits) - 1)) !== 0) throw new LatchkeyError('invalid_request', 'That vault recovery key has a mistyped last character.');
    return out;
  },
});

/**
 * A vault whose creation stopped before any key was stored: no passkey wrap and no recovery wrap.
 * `lk.vault.create()` finishes it. An email session is never shown the recovery wrap (docs/vault.md), so
 * for it an empty `wrapped` proves nothing: `session` names the session that read `vault`.
 */
export function isUnfinishedVault(vault, session) {
  return Boolean(vault) && vault.wrapped.length === 0 && !vault.recovery && Boolean(session) && session.method !== 'email';
}

/** An open vault: the data key, held in this page only. */
class OpenVault {
  constructor(dataKey, credentialId) { this._key = dataKey; this.credentialId = credentialId; }
  /** → base64url(IV ‖ AES-256-GCM ciphertext ‖ tag) of a string or bytes. */
  async encrypt(data) { return base64url.encode(await vaultCrypto.seal(typeof data === 'string' ? new TextEncoder().encode(data) : data, this._key, new Uint8Array(0))); }
  /** → the bytes `encrypt` sealed. */
  decrypt(sealed) { return vaultCrypto.open(sealed, this._key, new Uint8Array(0)); }
  /** → the string `encrypt` sealed. */
  async decryptText(sealed) { return new TextDecoder().decode(await this.decrypt(sealed)); }
}

class VaultAPI {
  constructor(lk) { this.lk = lk; }
  /** `GET /v1/vault` → `{prfSalt, wrapped, recovery}`, or null when the account has none. */
  async get() {
    try { return await this.lk.request('GET', '/v1/vault', { auth: true }); } catch (e) {
      if (e instanceof LatchkeyError && e.status === 404) return null;
      throw e;
    }
  }

  /**
   * Asks one of `credentialIds` for its PRF output on the vault's salt (user verification required).
   * The assertion is used here only and never sent: the server sees neither it nor the output.
   * → `{prfOutput, credentialId, userHandle}`.
   */
  async _prf(prfSalt, credentialIds) {
    const options = await this.lk.request('POST', '/v1/passkeys/authentication/options', { body: {} });
    options.allowCredentials = credentialIds.map((id) => ({ type: 'public-key', id }));
    options.userVerification = 'required';
    options.extensions = { prf: { eval: { first: prfSalt } } };
    await this.lk.abortConditional();
    const publicKey = parseRequestOptions(options);
    publicKey.extensions = { prf: { eval: { first: bytesOf(prfSalt) } } };
    let credential;
    try { credential = await navigator.credentials.get({ publicKey }); } catch (e) {
      throw ceremonyError(e, { kind: 'get', timeout: options.timeout || 0, rpId: options.rpId || '' });
    }
    if (!credential) throw new LatchkeyError('cancelled', 'No passkey was chosen.');
    const results = credential.getClientExtensionResults().prf;
    const first = results && results.results && results.results.first;
    if (!first) throw new LatchkeyError('not_supported', 'This passkey cannot open a vault (no PRF).');
    return { prfOutput: bytesOf(first), credentialId: base64url.encode(credential.rawId), userHandle: bytesOf(credential.response.userHandle) };
  }

  /**
   * Creates the vault and wraps a new data key for a passkey the person picks. → an open vault.
   * `PUT /v1/vault` succeeds once per account, so the salt is stored only after the passkey
   * answered (a prompt cancelled first leaves nothing), and a vault left with no key at all (no
   * wrap, no recovery wrap: its creation stopped after the salt) is finished with its own salt.
   */
  async create({ reason } = {}) {
    const existing = await this.get();
    if (existing && !isUnfinishedVault(existing, this.lk.session)) throw new LatchkeyError('conflict', 'This account has a vault already.', { status: 409 });
    const prfSalt = existing ? existing.prfSalt : base64url.encode(globalThis.crypto.getRandomValues(new Uint8Array(32)));
    // The passkeys that said they can evaluate PRF (older registrations did not say: then any of them).
    const all = (await this.lk.passkeys.list()).filter((p) => !p.heldUntil);
    const able = all.filter((p) => p.prfEnabled);
    const { prfOutput, credentialId, userHandle } = await this._prf(prfSalt, (able.length ? able : all).map((p) => p.id));
    if (!existing) await this.lk.request('PUT', '/v1/vault', { auth: true, body: { prfSalt } });
    const dataKey = globalThis.crypto.getRandomValues(new Uint8Array(32));
    await this._store(credentialId, await vaultCrypto.wrapForPasskey(dataKey, prfOutput, userHandle, credentialId), reason);
    return new OpenVault(dataKey, credentialId);
  }

  /** Opens the vault with one of the passkeys it is wrapped for (`userVerification: "required"`). → an open vault. */
  async unlock() {
    const vault = await this.get();
    if (!vault) throw new LatchkeyError('not_found', 'This account has no vault yet.', { status: 404 });
    if (!vault.wrapped.length) throw new LatchkeyError('vault_locked', 'No passkey opens this vault: use the vault recovery key.');
    const { prfOutput, credentialId, userHandle } = await this._prf(vault.prfSalt, vault.wrapped.map((w) => w.credentialId));
    const entry = vault.wrapped.find((w) => w.credentialId === credentialId);
    return new OpenVault(await vaultCrypto.unwrapForPasskey(entry.wrappedKey, prfOutput, userHandle, credentialId), credentialId);
  }

  /** Wraps an open vault's data key for another passkey of the account (after `passkeys.add`). */
  async addPasskey(open, credentialId, { reason } = {}) {
    const vault = await this.get();
    const r = await this._prf(vault.prfSalt, [credentialId]);
    await this._store(r.credentialId, await vaultCrypto.wrapForPasskey(open._key, r.prfOutput, r.userHandle, r.credentialId), reason);
  }

  /**
   * Makes the vault's recovery key and stores the data key wrapped under it. → the 52-character code,
   * to show the person once (with their recovery codes); Latchkey never receives it.
   */
  async makeRecoveryKey(open, { reason } = {}) {
    const recoveryKey = globalThis.crypto.getRandomValues(new Uint8Array(32));
    const wrappedKey = await vaultCrypto.wrapForRecovery(open._key, recoveryKey);
    await this.lk.withStepUp(actions.vaultRecovery(),
      (headers) => this.lk.request('PUT', '/v1/vault/recovery', { auth: true, body: { wrappedKey }, headers }), reason);
    return vaultCrypto.recoveryCode(recoveryKey);
  }

  /** After an account recovery: opens the vault with the written-down code (then `addPasskey` for the new passkey). */
  async recover(code) {
    const vault = await this.get();
    if (!vault || !vault.recovery) throw new LatchkeyError('not_found', 'This session cannot read the vault recovery wrap.', { status: 404 });
    return new OpenVault(await vaultCrypto.unwrapForRecovery(vault.recovery.wrappedKey, vaultCrypto.parseRecoveryCode(code)), null);
  }

  _store(credentialId, wrappedKey, reason) {
    return this.lk.withStepUp(actions.vaultWrap(credentialId),
      (headers) => this.lk.request('PUT', `/v1/vault/wrapped/${encodeURIComponent(credentialId)}`, { auth: true, body: { wrappedKey }, headers }), reason);
  }
}
