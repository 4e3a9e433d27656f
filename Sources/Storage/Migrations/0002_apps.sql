CREATE TABLE apps (
    rp_id            text NOT NULL,                -- the domain whose .well-known files list the app
    platform         text NOT NULL CHECK (platform IN ('ios', 'android')),
    app_id           text NOT NULL,                -- iOS: TEAMID.bundle.id; Android: package name
    fingerprints     jsonb NOT NULL DEFAULT '[]',  -- Android: base64url SHA-256 of each signing certificate
    handle_all_urls  boolean NOT NULL DEFAULT false,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (rp_id, platform, app_id)
);

CREATE FUNCTION latchkey_config_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM pg_notify('latchkey_config', TG_TABLE_NAME); RETURN NULL; END $$;
CREATE TRIGGER origins_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON origins
    FOR EACH STATEMENT EXECUTE FUNCTION latchkey_config_changed();
CREATE TRIGGER apps_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON apps
    FOR EACH STATEMENT EXECUTE FUNCTION latchkey_config_changed();
