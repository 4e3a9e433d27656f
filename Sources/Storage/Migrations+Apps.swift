extension LatchkeyMigrations {
    /// Associated native apps (issue: native-app association). The apps table is the one source of
    /// truth: the origins they need are kept in `origins` with source 'app' by Store.putApp /
    /// removeApp in the same transaction. Any change to either table notifies every instance on
    /// channel `latchkey_config` (delivered at commit), so caches refresh without restarts.
    static let apps: [(version: Int, name: String, sql: String)] = [
        (2, "associated apps and change notifications", """
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
        """),
    ]
}
