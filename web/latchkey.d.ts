// Types for latchkey.js (the browser client of a Latchkey server). Served at /latchkey.d.ts.

export declare const VERSION: string;

/** Latchkey's problem codes. */
export type ServerCode =
  | 'invalid_request' | 'challenge_invalid' | 'origin_not_allowed' | 'rp_id_mismatch'
  | 'user_presence_required' | 'user_verification_required' | 'signature_invalid' | 'attestation_invalid'
  | 'algorithm_unsupported' | 'credential_unknown' | 'credential_exists' | 'sign_count_regression'
  | 'action_mismatch' | 'key_revoked' | 'unauthorized' | 'forbidden' | 'not_found' | 'conflict'
  | 'payload_too_large' | 'rate_limited' | 'invalid_grant' | 'step_up_required' | 'code_invalid'
  | 'recovery_pending' | 'internal_error';

/** Codes the client itself gives (no HTTP status). */
export type ClientCode =
  | 'network' | 'cancelled' | 'timeout' | 'aborted' | 'invalid_state' | 'security' | 'not_supported'
  | 'unsupported_browser' | 'insecure_context' | 'declined' | 'unknown';

export declare const CLIENT_CODES: readonly ClientCode[];

export interface Problem {
  type?: string; title?: string; status?: number; detail?: string; code?: ServerCode;
  signal?: Signal;
  [member: string]: unknown;
}

export declare class LatchkeyError extends Error {
  constructor(code: ServerCode | ClientCode | string, message: string,
    details?: { status?: number; problem?: Problem | null; retryAfter?: number | null; cause?: unknown });
  readonly name: 'LatchkeyError';
  /** Stable: one of Latchkey's problem codes or a ClientCode. */
  code: ServerCode | ClientCode | string;
  /** HTTP status; 0 when the failure happened in the browser. */
  status: number;
  problem: Problem | null;
  /** Seconds from `Retry-After` (429). */
  retryAfter: number | null;
  /** cancelled, timeout or aborted. */
  readonly isCancellation: boolean;
  /** 409 credential_exists for a retried registration that was saved: the stored passkey. */
  passkey: Passkey | null;
  /** A SecurityError's rpId (from the options) and the address that works. */
  rpId?: string | null;
  suggestion?: string | null;
}

export declare function ceremonyError(error: unknown, context?: { started?: number; timeout?: number; kind?: 'create' | 'get' }): LatchkeyError;

export interface OriginExplanation { code: 'ok' | 'security' | 'insecure_context'; message: string; suggestion: string | null }
export declare function explainOrigin(where?: Pick<Location, 'protocol' | 'hostname' | 'host' | 'port' | 'pathname'>): OriginExplanation;

export interface BrowserSupport {
  supported: boolean;
  conditionalGet: boolean;
  conditionalCreate: boolean;
  problem: { code: string; message: string } | null;
}
export declare function browserSupport(): Promise<BrowserSupport>;

export declare const base64url: {
  decode(s: string): ArrayBuffer;
  encode(bytes: ArrayBuffer | ArrayBufferView): string;
};

/** A DPoP key: the private half cannot leave WebCrypto (extractable false); `jwk` is the public half. */
export interface DPoPKey { privateKey: CryptoKey; jwk: { kty: 'EC'; crv: 'P-256'; x: string; y: string } }
export interface DPoPKeyStore {
  get(id: string): Promise<DPoPKey | undefined>;
  put(id: string, key: DPoPKey): Promise<void>;
  delete(id: string): Promise<void>;
}
export declare function indexedDBKeyStore(name?: string): DPoPKeyStore;
export declare function memoryKeyStore(): DPoPKeyStore;
/** RFC 9449 proofs with WebCrypto (ES256). */
export declare const dpop: {
  generate(): Promise<DPoPKey>;
  thumbprint(jwk: DPoPKey['jwk']): Promise<string>;
  ath(accessToken: string): Promise<string>;
  proof(key: DPoPKey, claims: { method: string; url: string; accessToken?: string; nonce?: string }): Promise<string>;
};

export type CreationOptionsJSON = Record<string, any> & { challenge: string; user: { id: string; name: string; displayName: string } };
export type RequestOptionsJSON = Record<string, any> & { challenge: string };
export type RegistrationResponseJSON = Record<string, any> & { id: string; rawId: string; type: 'public-key' };
export type AuthenticationResponseJSON = Record<string, any> & { id: string; rawId: string; type: 'public-key' };

export declare function parseCreationOptions(json: CreationOptionsJSON): PublicKeyCredentialCreationOptions;
export declare function parseRequestOptions(json: RequestOptionsJSON): PublicKeyCredentialRequestOptions;
export declare function credentialToJSON(credential: PublicKeyCredential): RegistrationResponseJSON | AuthenticationResponseJSON;
export declare function startRegistration(options: CreationOptionsJSON, opts?: { signal?: AbortSignal; mediation?: 'conditional' }): Promise<RegistrationResponseJSON>;
export declare function startAuthentication(options: RequestOptionsJSON, opts?: { signal?: AbortSignal; mediation?: 'conditional' | 'immediate' | 'optional' | 'required' }): Promise<AuthenticationResponseJSON>;
/** Whether the browser offers `mediation: "immediate"` for sign-in (the `immediateGet` client capability); `signIn()` uses it, then the modal. */
export declare function immediateGetAvailable(): Promise<boolean>;

export interface Signal {
  method: 'signalUnknownCredential' | 'signalAllAcceptedCredentials' | 'signalCurrentUserDetails';
  options: Record<string, unknown>;
}
export declare const SIGNAL_METHODS: readonly Signal['method'][];
export declare function passSignal(signal: Signal): Promise<boolean>;
export declare function passSignals(json: unknown): void;

export type Action = { type: string; [member: string]: unknown };
export declare const actions: {
  addPasskey(): Action;
  revokePasskey(credentialId: string): Action;
  changeEmail(email: string): Action;
  createRecoveryCodes(): Action;
  admin(method: string, path: string, body?: unknown): Action;
  approveCIBA(request: CIBARequest): Action;
};

export interface User { id: string; username: string; displayName: string }
export interface Tokens { access_token: string; token_type: 'Bearer' | 'DPoP'; expires_in: number; refresh_token: string }
export interface Passkey {
  id: string; name: string; provider: string | null; aaguid: string; createdAt: string; lastUsedAt: string | null;
  backupEligible: boolean; backedUp: boolean; transports: string[]; flagged: boolean; heldUntil?: string;
}
export interface SessionInfo {
  id: string; method: 'passkey' | 'ticket' | 'email' | 'recovery' | 'oauth'; credentialId: string | null;
  createdAt: string; lastUsedAt: string; authTime: string; current: boolean;
}
export interface SignInResult { user: User; passkey?: Passkey; tokens: Tokens; signals?: Signal[] }
export interface StepUpApproval { token: string; actionHash: string; receiptId: string; expiresIn: number }
export interface RecoveryTicket { recoveryToken: string; expiresIn: number; notBefore: string; recoveryId: string }
export interface Challenge { challengeId: string; expiresAt: string }
export interface CIBARequest {
  authReqId: string;
  client: { id: string; name: string; cibaApprover: 'attested-device-key' | 'device-key' | 'passkey' | null };
  bindingMessage: string | null; scopes: string[]; authorizationDetails: unknown[] | null;
  display: { lang: string; lines: string[]; approve: string };
  createdAt: string; expiresAt: string;
}

export interface LatchkeyConfig {
  /** The Latchkey server; '' (default) = this page's origin. */
  baseURL?: string;
  /** Where the session is kept; default sessionStorage, null = memory only. */
  storage?: Pick<Storage, 'getItem' | 'setItem' | 'removeItem'> | null;
  storageKey?: string;
  /** Before a step-up prompt for a gated change; false cancels it (LatchkeyError 'declined'). */
  confirmStepUp?: (info: { action: Action; reason: string }) => boolean | Promise<boolean>;
  /** The session ended without signOut (a refused refresh). */
  onSessionEnded?: (reason: LatchkeyError | null) => void;
  fetch?: typeof fetch;
  /** Sent as Accept-Language: the server stores it as the account's language for mail. */
  language?: string;
  /** Bind the session to a DPoP key ('auto', the default: where WebCrypto and IndexedDB are at hand). */
  dpop?: boolean | 'auto';
  /** Where the DPoP key is kept (IndexedDB by default). */
  dpopKeyStore?: DPoPKeyStore;
}

export interface RequestOptions {
  body?: unknown; auth?: boolean; token?: string | null; ticket?: string | null;
  headers?: Record<string, string>; retry?: boolean;
  /** A request that issues tokens: send a DPoP proof (when DPoP is on) to bind them. */
  proof?: boolean;
  /** `token` is DPoP-bound: send it as `Authorization: DPoP` with a proof. */
  bound?: boolean;
}

export declare class Latchkey {
  constructor(config?: LatchkeyConfig);
  baseURL: string;
  language?: string;
  session: { user: User; tokens: Tokens; method?: string } | null;
  readonly user: User | null;
  readonly autofillPending: boolean;
  request<T = any>(method: string, path: string, options?: RequestOptions): Promise<T>;
  /** POST /v1/passkeys/registration/verify, sent again (twice at most) when its answer is lost. */
  verifyRegistration(credential: RegistrationResponseJSON): Promise<SignInResult>;
  refresh(): Promise<boolean>;
  /** Whether sign-ins, refreshes and calls carry DPoP proofs. */
  readonly dpopEnabled: boolean;
  /** This client's DPoP key, made and stored on first use. */
  dpopKey(): Promise<DPoPKey>;
  /** Its RFC 7638 thumbprint: the `cnf.jkt` of the session's access tokens. */
  dpopThumbprint(): Promise<string>;
  signUp(who: { username: string; displayName?: string }): Promise<SignInResult>;
  signIn(opts?: { username?: string; userVerification?: 'required' | 'preferred' | 'discouraged' }): Promise<SignInResult>;
  /** Conditional UI: null when it ends without a choice, is aborted, or is unavailable. */
  signInWithAutofill(): Promise<SignInResult | null>;
  abortConditional(): Promise<void>;
  signOut(): Promise<void>;
  forget(): void;
  stepUp(action: Action): Promise<StepUpApproval>;
  consumeStepUp(token: string, actionHash: string): Promise<unknown>;
  withStepUp<T>(action: Action, send: (headers: Record<string, string>) => Promise<T>, reason?: string): Promise<T>;
  methods(): Promise<{ emailSignIn: boolean; [member: string]: unknown }>;
  passkeys: {
    list(): Promise<Passkey[]>;
    rename(id: string, name: string): Promise<Passkey>;
    revoke(id: string, opts?: { reason?: string }): Promise<{ sessionEnded: boolean; signals?: Signal[] }>;
    add(opts?: { mediation?: 'conditional'; reason?: string; signal?: AbortSignal }): Promise<SignInResult>;
    enrolWithTicket(ticket: string, opts?: { userVerification?: 'required' | 'preferred' }): Promise<SignInResult>;
  };
  sessions: {
    list(): Promise<SessionInfo[]>;
    current(): Promise<SessionInfo | null>;
    end(id: string): Promise<{ current: boolean }>;
  };
  recovery: {
    status(): Promise<{ email: string | null; recoveryCodesLeft: number; pendingRecoveries: { recoveryId: string; method: string; notBefore: string }[] }>;
    start(who: { username: string } | { email: string }): Promise<Challenge>;
    verifyCode(challengeId: string, code: string): Promise<RecoveryTicket>;
    useRecoveryCode(username: string, recoveryCode: string): Promise<RecoveryTicket>;
    createPasskey(recoveryToken: string, opts?: { mediation?: 'conditional'; signal?: AbortSignal }): Promise<SignInResult>;
    cancel(recoveryId: string): Promise<null>;
    useCancelLink(cancelToken: string): Promise<null>;
    createCodes(): Promise<{ codes: string[] }>;
  };
  email: {
    startSignIn(email: string): Promise<Challenge>;
    finishSignIn(challengeId: string, code: string): Promise<SignInResult>;
    setAddress(email: string, opts?: { reason?: string }): Promise<Challenge>;
    verifyAddress(challengeId: string, code: string): Promise<{ email: string; verified: true }>;
  };
  ciba: {
    list(): Promise<CIBARequest[]>;
    approvable(request: CIBARequest): boolean;
    approve(request: CIBARequest): Promise<{ receiptId: string }>;
    deny(authReqId: string): Promise<null>;
  };
}
