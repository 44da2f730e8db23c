-- E-mail addresses compare byte for byte (docs/identity.md, "E-mail and passwords"). Under utf8mb4_unicode_ci
-- ann@exámple.org equals ann@example.org, so a look-alike address found another account's row: its reset, and the
-- reset's `AND email = ?`. NormalizeEmail gives each address one spelling (lower-cased, the domain in ASCII), so a
-- binary collation loses no match that should be one. MODIFY restates each column whole, so it can run again.
ALTER TABLE users MODIFY email VARCHAR(254) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL;
ALTER TABLE users MODIFY pending_email VARCHAR(254) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL;
ALTER TABLE account_token MODIFY email VARCHAR(254) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL;
