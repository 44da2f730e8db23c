-- The lookup of verified addresses compares them byte for byte too (see mysql/006_email_binary.sql): under
-- utf8mb4_unicode_ci a look-alike address would collide with, or be found as, another account's.
ALTER TABLE email_lookup MODIFY email VARCHAR(254) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL;
