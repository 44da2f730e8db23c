-- A linking begun while signed in (oidc_state.link_user_id). link_epoch: the token epoch of the session that began
-- it; the callback links only while the user's token_epoch is still this one, so a linking begun with a token that
-- has since ended (password changed or reset, every session ended, account deleted) does nothing. reauth: the
-- provider was asked for a fresh sign-in (an account without a password), whose auth_time the callback checks.
ALTER TABLE oidc_state ADD COLUMN link_epoch BIGINT NULL, ADD COLUMN reauth BOOLEAN NOT NULL DEFAULT FALSE;
