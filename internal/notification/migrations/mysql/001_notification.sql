-- Each user's inbox: the sequence that every new or changed notification takes the next number of (the stream's
-- event ids, the list's order), the unread count, and the kinds the user wants. Its row is the lock that a user's
-- notification changes take first, so that they happen one at a time and in sequence order.
CREATE TABLE IF NOT EXISTS inbox (
    user_id            BIGINT   NOT NULL PRIMARY KEY,
    seq                BIGINT   NOT NULL DEFAULT 0,
    unread             BIGINT   NOT NULL DEFAULT 0,
    want_reply         BOOLEAN  NOT NULL DEFAULT TRUE,
    want_comment_reply BOOLEAN  NOT NULL DEFAULT TRUE,
    want_like          BOOLEAN  NOT NULL DEFAULT TRUE,
    want_moderation    BOOLEAN  NOT NULL DEFAULT TRUE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- A user's notifications. seq is the inbox's sequence at the notification's last change. dedupe_key makes an event
-- delivered twice change nothing: c:<commentId> for a comment's, m:<eventId> for a moderator's act, and l:<articleId>
-- for the unread like group of an article, which reading it sets to NULL so that the next like starts a new group.
CREATE TABLE IF NOT EXISTS notification (
    user_id         BIGINT        NOT NULL,
    notification_id BIGINT        NOT NULL,
    seq             BIGINT        NOT NULL,
    kind            VARCHAR(16)   NOT NULL,
    dedupe_key      VARCHAR(64)   NULL,
    article_id      BIGINT        NOT NULL DEFAULT 0,
    article_title   VARCHAR(255)  NOT NULL DEFAULT '',
    comment_id      BIGINT        NOT NULL DEFAULT 0,
    actor_ids       VARCHAR(255)  NOT NULL DEFAULT '',
    actor_count     BIGINT        NOT NULL DEFAULT 0,
    action          VARCHAR(16)   NOT NULL DEFAULT '',
    reason          VARCHAR(600)  NOT NULL DEFAULT '',
    is_read         BOOLEAN       NOT NULL DEFAULT FALSE,
    created_at      DATETIME(3)   NOT NULL,
    updated_at      DATETIME(3)   NOT NULL,
    PRIMARY KEY (user_id, notification_id),
    UNIQUE KEY idx_user_seq (user_id, seq),
    UNIQUE KEY idx_user_dedupe (user_id, dedupe_key),
    KEY idx_user_article (user_id, article_id),
    KEY idx_user_unread (user_id, is_read)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- Who has liked a user's article: a like notifies its writer once per liker, whatever unlikes and likes follow.
CREATE TABLE IF NOT EXISTS like_actor (
    user_id    BIGINT NOT NULL,
    article_id BIGINT NOT NULL,
    actor_id   BIGINT NOT NULL,
    PRIMARY KEY (user_id, article_id, actor_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- The articles and comments the events told of, for who to notify: an article's writer, a reply's parent's writer.
-- A deleted one stays, marked, so that a replayed create notifies no one.
CREATE TABLE IF NOT EXISTS article_ref (
    article_id BIGINT       NOT NULL PRIMARY KEY,
    writer_id  BIGINT       NOT NULL,
    title      VARCHAR(255) NOT NULL,
    deleted    BOOLEAN      NOT NULL DEFAULT FALSE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;

-- path compares byte by byte, as in the comment service. A comment hidden by moderation before its create was read
-- here (the topics are read apart) has a row before it is created: created is false until then.
CREATE TABLE IF NOT EXISTS comment_ref (
    article_id BIGINT      NOT NULL,
    comment_id BIGINT      NOT NULL,
    path       VARCHAR(25) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    parent_id  BIGINT      NOT NULL,
    writer_id  BIGINT      NOT NULL,
    deleted    BOOLEAN     NOT NULL DEFAULT FALSE,
    hidden     BOOLEAN     NOT NULL DEFAULT FALSE,
    created    BOOLEAN     NOT NULL DEFAULT TRUE,
    PRIMARY KEY (article_id, comment_id),
    KEY idx_article_path (article_id, path)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_unicode_ci;
