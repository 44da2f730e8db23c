-- See the mysql migration.
ALTER TABLE oidc_state ADD COLUMN link_epoch INTEGER NULL;
ALTER TABLE oidc_state ADD COLUMN reauth BOOLEAN NOT NULL DEFAULT FALSE;
