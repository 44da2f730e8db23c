-- role_version counts the changes of a user's role: the RoleVersion of its USER_ROLE_CHANGED events, bumped in the
-- transaction that changes the role, so that every instance applies only the newest (internal/standing).
ALTER TABLE users ADD COLUMN role_version BIGINT NOT NULL DEFAULT 0;
