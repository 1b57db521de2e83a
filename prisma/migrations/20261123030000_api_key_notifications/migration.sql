-- API processes cache authenticated keys; any change to a key (created, revoked, deleted) is
-- announced on 'api_keys_changed' (payload: the key id) so that every API drops what it cached
-- at once, whoever made the change (the keys command, SQL by hand).
CREATE FUNCTION "api_keys_notify"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('api_keys_changed', coalesce(NEW.id, OLD.id));
    RETURN NULL;
END;
$$;

CREATE TRIGGER "api_keys_notify"
    AFTER INSERT OR UPDATE OF "revoked_at", "hash", "account_id" OR DELETE ON "api_keys"
    FOR EACH ROW EXECUTE FUNCTION "api_keys_notify"();
