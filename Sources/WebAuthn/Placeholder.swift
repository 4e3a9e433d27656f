// WebAuthn
