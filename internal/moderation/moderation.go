// Package moderation is the moderation service (SPEC §3.9): users report articles and comments, moderators work
// through a queue of reported targets and resolve them, lock and pin articles, ban users, and every action is
// written to a public moderation log.
//
// State and events. Each target (an article or a comment) that moderation knows of has one row holding its whole
// moderation state (hidden and why, locked, pinned) and a version; every change of it bumps the version and writes,
// in the same transaction, the target's ARTICLE_MODERATED or COMMENT_MODERATED with the whole state and a log entry.
// Bans likewise: a user's ban row and its USER_BANNED or USER_UNBANNED, with a version. Consumers keep the highest
// version they applied (internal/event), so the state they hold is the latest whatever order events arrive in.
//
// One at a time. Every write on a target locks its row first (SELECT ... FOR UPDATE; on SQLite the single writer
// does the same), so that a target's reports, resolutions, locks and pins are serialized: the report that reaches
// the threshold is exactly one, and hides the target exactly once however many arrive together. A missing row is
// created on its own first, outside the transaction that locks it (ensureTarget), so that concurrent first writes
// meet on a row and not on gap locks.
//
// The other services. Moderation reads no other service's tables: it looks a reported target up over HTTP at the
// article and comment services, and a user to ban at the user service, each call under a deadline; and it consumes
// the article and comment topics to forget deleted targets (Handlers).
package moderation

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"board/internal/apijson"
	"board/internal/event"
	"board/internal/fault"
	"board/internal/idempotency"
	"board/internal/outbox"
	"board/internal/snowflake"
	"board/internal/sqldb"
)

// TargetType is what a report or a moderator's action is about.
type TargetType string

const (
	Article TargetType = "article"
	Comment TargetType = "comment"
	// User is the target of bans, in the moderation log only.
	User TargetType = "user"
)

// Reason is why a user reports something.
type Reason string

const (
	Spam     Reason = "spam"
	Abuse    Reason = "abuse"
	OffTopic Reason = "off-topic"
	Other    Reason = "other" // needs a text
)

// Reasons lists every reason, in the order of the SPEC.
var Reasons = []Reason{Spam, Abuse, OffTopic, Other}

// Limits of what users and moderators write.
const (
	// MaxText is the most characters of a report's text, and of a moderator's reason.
	MaxText = 500
	// excerptRunes is how much of a comment the queue shows.
	excerptRunes = 200
	// DefaultReportThreshold is how many distinct open reports hide a target pending review.
	DefaultReportThreshold = 5
	// PinLimit is the most pinned articles per board.
	PinLimit = 3
	// DefaultLookupTimeout bounds each call to another service.
	DefaultLookupTimeout = 2 * time.Second
)

// Resolution actions (POST /v1/reports/resolutions).
const (
	Dismiss = "dismiss" // the reports were unfounded: a target hidden by them is shown again
	Remove  = "remove"  // the target is hidden by a moderator, with the reason shown in its place
	// actionDismiss is the log's action of a dismissal that changed nothing shown (the target was not hidden by the
	// reports).
	actionDismiss = "dismiss"
)

// IDGenerator issues unique ids (a Snowflake generator in production).
type IDGenerator interface {
	Next() (int64, error)
}

// Origins are the base URLs of the services moderation looks things up at.
type Origins struct {
	Article, Comment, User string
}

// Config configures a Service.
type Config struct {
	Origins Origins
	// ReportThreshold is how many distinct open reports hide a target at once; 0 is DefaultReportThreshold.
	ReportThreshold int
	// Client makes the lookups; nil gets a client of its own.
	Client *http.Client
	// LookupTimeout bounds each lookup; 0 is DefaultLookupTimeout.
	LookupTimeout time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Service holds the moderation rules over its database. Who may call what is the HTTP layer's check (Routes): a
// Service acts for the moderator it is given.
type Service struct {
	db     *sqldb.DB
	ob     *outbox.Outbox
	ids    IDGenerator
	cfg    Config
	client *http.Client
	keys   *idempotency.Store // the Idempotency-Keys of reports
}

// New returns the moderation service over db, whose schema Migrate has prepared, writing its events to ob.
func New(db *sqldb.DB, ob *outbox.Outbox, ids IDGenerator, cfg Config) *Service {
	if cfg.ReportThreshold <= 0 {
		cfg.ReportThreshold = DefaultReportThreshold
	}
	if cfg.LookupTimeout <= 0 {
		cfg.LookupTimeout = DefaultLookupTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	client := cfg.Client
	if client == nil {
		// Each call has its deadline from its context; the transport's own timeouts bound what a context does not.
		client = &http.Client{Timeout: 2 * cfg.LookupTimeout,
			Transport: &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: time.Minute, ResponseHeaderTimeout: cfg.LookupTimeout}}
	}
	return &Service{db: db, ob: ob, ids: ids, cfg: cfg, client: client, keys: idempotency.New(db, cfg.Now)}
}

// Report is one user's report of one target.
type Report struct {
	ID         int64
	TargetType TargetType
	TargetID   int64
	ArticleID  int64
	ReporterID int64
	Reason     Reason
	Text       string
	CreatedAt  time.Time
}

// Queued is a target in the moderators' queue: its open reports, grouped.
type Queued struct {
	TargetType      TargetType
	TargetID        int64
	BoardID         int64
	ArticleID       int64
	Excerpt         string
	WriterID        int64
	ReportCount     int64
	Reasons         map[Reason]int64
	FirstReportedAt time.Time
	Hidden          event.Hidden
}

// ArticleState is an article's moderation state.
type ArticleState struct {
	ArticleID         int64
	BoardID           int64
	WriterID          int64
	Hidden            event.Hidden
	RemovedReason     string
	Locked            bool
	Pinned            bool
	ModerationVersion int64
}

// Ban is a user's ban; Until is nil for a ban for good.
type Ban struct {
	UserID      int64
	Reason      string
	Until       *time.Time
	ModeratorID int64
	CreatedAt   time.Time
}

// LogEntry is one line of the moderation log. ArticleID is the target's article (0 for a user).
type LogEntry struct {
	Action      string
	TargetType  TargetType
	TargetID    int64
	ArticleID   int64
	ModeratorID int64
	Reason      string
	CreatedAt   time.Time
	// ResolutionID is, for a resolution (dismiss, remove, restore), the id its reports were closed with; else 0.
	ResolutionID int64
	// Reports are the reports a resolution closed, read only for moderators (Log's withReports).
	Reports []LoggedReport
}

// LoggedReport is a report a resolution closed, as moderators see it in the log.
type LoggedReport struct {
	ReporterID int64
	Reason     Reason
	Text       string
}

// ParseReason returns the reason named s.
func ParseReason(s string) (Reason, error) {
	if slices.Contains(Reasons, Reason(s)) {
		return Reason(s), nil
	}
	return "", fault.Invalidf("INVALID_REASON", "reason must be one of spam, abuse, off-topic, other")
}

// ParseTargetType returns the reportable target type named s.
func ParseTargetType(s string) (TargetType, error) {
	switch t := TargetType(s); t {
	case Article, Comment:
		return t, nil
	}
	return "", fault.Invalidf("INVALID_TARGET_TYPE", "targetType must be article or comment")
}

// CheckText checks the length of a report's text or a moderator's reason (field names it for the message).
func CheckText(field, text string) error {
	if n := utf8.RuneCountInString(text); n > MaxText {
		code := "TEXT_TOO_LONG"
		if field != "text" {
			code = "REASON_TOO_LONG"
		}
		return fault.Invalidf(code, "%s is %d characters; at most %d", field, n, MaxText)
	}
	return nil
}

func (s *Service) now() time.Time { return apijson.Millis(s.cfg.Now()) }

func (s *Service) nextID() (int64, error) {
	id, err := s.ids.Next()
	if err != nil {
		return 0, snowflake.Unavailable(err)
	}
	return id, nil
}

// targetRow is a target's row.
type targetRow struct {
	typ                    TargetType
	id, articleID, boardID int64
	writerID               int64
	excerpt                string
	hidden                 event.Hidden
	removedReason          string
	locked, pinned         bool
	version, openReports   int64
	queuedAt               sql.NullTime
}

const targetColumns = "target_type, target_id, article_id, board_id, writer_id, excerpt, hidden, removed_reason, locked, pinned, " +
	"moderation_version, open_reports, queued_at"

func scanTarget(row interface{ Scan(...any) error }) (targetRow, error) {
	var t targetRow
	var typ, hidden string
	err := row.Scan(&typ, &t.id, &t.articleID, &t.boardID, &t.writerID, &t.excerpt, &hidden, &t.removedReason, &t.locked,
		&t.pinned, &t.version, &t.openReports, &t.queuedAt)
	t.typ, t.hidden = TargetType(typ), event.Hidden(hidden)
	t.queuedAt.Time = t.queuedAt.Time.UTC()
	return t, err
}

// errNoTarget says a target has no row.
var errNoTarget = errors.New("moderation target has no row")

// lockTarget reads a target's row and locks it until the transaction ends. Every statement of a transaction names
// the board, the shard key of content moderation, so that behind Vitess the transaction stays on the board's shard.
func (s *Service) lockTarget(ctx context.Context, tx *sql.Tx, typ TargetType, id, boardID int64) (targetRow, error) {
	t, err := scanTarget(tx.QueryRowContext(ctx, "SELECT "+targetColumns+" FROM moderation_target WHERE board_id = ? AND target_type = ? AND target_id = ?"+
		s.db.ForUpdate(), boardID, string(typ), id))
	if errors.Is(err, sql.ErrNoRows) {
		return t, errNoTarget
	}
	return t, err
}

// boardOf returns the board of a target that has a row, errNoTarget for one without. It reads outside any
// transaction: behind Vitess, a read that names no board asks every shard, which a transaction may not.
func (s *Service) boardOf(ctx context.Context, typ TargetType, id int64) (int64, error) {
	var board int64
	err := s.db.QueryRowContext(ctx, "SELECT board_id FROM moderation_target WHERE target_type = ? AND target_id = ?", string(typ), id).Scan(&board)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, errNoTarget
	}
	return board, err
}

// ensureTarget creates a target's row from what a lookup found, unless it has one; an existing row gets the
// lookup's excerpt (a title may have changed). It commits on its own (see the package doc).
func (s *Service) ensureTarget(ctx context.Context, t found) error {
	_, err := s.db.ExecContext(ctx, "INSERT INTO moderation_target (target_type, target_id, article_id, board_id, writer_id, excerpt) VALUES (?, ?, ?, ?, ?, ?)"+
		s.db.OnConflictUpdate("target_type, target_id", "excerpt = ?"),
		string(t.typ), t.id, t.articleID, t.boardID, t.writerID, t.excerpt, t.excerpt)
	return err
}

// change writes a target's new state (t, as the caller changed it) with the next version, the event that reports
// it (keyed by its board, see internal/event), and its log entry.
// resolution is the id of the resolution the change comes from, 0 for none.
func (s *Service) change(ctx context.Context, tx *sql.Tx, emit outbox.Emit, t *targetRow, action, reason string, moderatorID, resolution int64) error {
	t.version++
	if _, err := tx.ExecContext(ctx, "UPDATE moderation_target SET hidden = ?, removed_reason = ?, locked = ?, pinned = ?, moderation_version = ? "+
		"WHERE board_id = ? AND target_type = ? AND target_id = ?", string(t.hidden), t.removedReason, t.locked, t.pinned, t.version, t.boardID,
		string(t.typ), t.id); err != nil {
		return err
	}
	now := apijson.Time(s.now())
	var err error
	if t.typ == Article {
		err = emit(event.ArticleModerated, t.boardID, event.ArticleModeration{ArticleID: apijson.ID(t.id), BoardID: apijson.ID(t.boardID),
			WriterID: apijson.ID(t.writerID), Hidden: t.hidden, RemovedReason: t.removedReason, Locked: t.locked, Pinned: t.pinned,
			Action: action, Reason: reason, ModeratorID: apijson.ID(moderatorID), ModeratedAt: now, ModerationVersion: t.version})
	} else {
		err = emit(event.CommentModerated, t.boardID, event.CommentModeration{CommentID: apijson.ID(t.id), ArticleID: apijson.ID(t.articleID),
			BoardID: apijson.ID(t.boardID), WriterID: apijson.ID(t.writerID), Hidden: t.hidden, RemovedReason: t.removedReason, Action: action, Reason: reason,
			ModeratorID: apijson.ID(moderatorID), ModeratedAt: now, ModerationVersion: t.version})
	}
	if err != nil {
		return err
	}
	return s.log(ctx, tx, t.boardID, LogEntry{Action: action, TargetType: t.typ, TargetID: t.id, ArticleID: t.articleID, ModeratorID: moderatorID,
		Reason: reason, ResolutionID: resolution})
}

// log writes a moderation log entry, at the service's now, on the shard of the transaction's other rows: shardKey
// is the target's board, or the user of a ban.
func (s *Service) log(ctx context.Context, tx *sql.Tx, shardKey int64, e LogEntry) error {
	id, err := s.nextID()
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, "INSERT INTO modlog (log_id, shard_key, action, target_type, target_id, article_id, moderator_id, reason, created_at, resolution_id) "+
		"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", id, shardKey, e.Action, string(e.TargetType), e.TargetID, e.ArticleID, e.ModeratorID, e.Reason, s.now(), e.ResolutionID)
	return err
}

// Report records reporterID's report of a target, looked up at its service first: TARGET_NOT_FOUND when it does not
// exist (a comment marked deleted included), OWN_CONTENT when the reporter wrote it, REPORT_EXISTS when the reporter
// has an open report of it already. The report that brings the target's open reports to the threshold hides it,
// pending review, in the same transaction.
func (s *Service) Report(ctx context.Context, reporterID int64, typ TargetType, targetID int64, reason Reason, text string) (Report, error) {
	return s.report(ctx, reporterID, typ, targetID, reason, text, nil)
}

// report is Report recording its answer for key (nil for none) in the same transaction, on the target's board's
// shard.
func (s *Service) report(ctx context.Context, reporterID int64, typ TargetType, targetID int64, reason Reason, text string,
	key *idempotency.Write) (Report, error) {
	t, err := s.lookUp(ctx, typ, targetID)
	if err != nil {
		return Report{}, err
	}
	if t.writerID == reporterID {
		return Report{}, fault.Invalidf("OWN_CONTENT", "you cannot report your own %s", typ)
	}
	id, err := s.nextID()
	if err != nil {
		return Report{}, err
	}
	r := Report{ID: id, TargetType: typ, TargetID: targetID, ArticleID: t.articleID, ReporterID: reporterID, Reason: reason, Text: text,
		CreatedAt: s.now()}
	if err := s.ensureTarget(ctx, t); err != nil {
		return Report{}, err
	}
	exists := fault.Conflictf("REPORT_EXISTS", "you have an open report of this %s already", typ)
	file := func(tx *sql.Tx, emit outbox.Emit) error {
		row, err := s.lockTarget(ctx, tx, typ, targetID, t.boardID)
		if errors.Is(err, errNoTarget) {
			return targetNotFound(typ, targetID) // deleted since the lookup
		} else if err != nil {
			return err
		}
		// Under the target's lock, so no other report of it comes between; the unique key backs this up.
		var open int64
		if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM report WHERE board_id = ? AND target_type = ? AND target_id = ? AND reporter_id = ? AND resolution_id = 0",
			t.boardID, string(typ), targetID, reporterID).Scan(&open); err != nil {
			return err
		}
		if open > 0 {
			return exists
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO report (report_id, board_id, target_type, target_id, article_id, reporter_id, reason, text, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
			r.ID, t.boardID, string(typ), targetID, r.ArticleID, reporterID, string(reason), text, r.CreatedAt); err != nil {
			if sqldb.IsDuplicate(err) {
				return exists
			}
			return err
		}
		if _, err := tx.ExecContext(ctx, "UPDATE moderation_target SET open_reports = open_reports + 1, queued_at = COALESCE(queued_at, ?) WHERE board_id = ? AND target_type = ? AND target_id = ?",
			r.CreatedAt, t.boardID, string(typ), targetID); err != nil {
			return err
		}
		if row.openReports+1 < int64(s.cfg.ReportThreshold) || row.hidden != event.Visible {
			return nil
		}
		counts, err := reasonCounts(ctx, tx, typ, targetID, t.boardID)
		if err != nil {
			return err
		}
		row.hidden, row.removedReason = event.Pending, pendingReason(row.openReports+1, counts)
		return s.change(ctx, tx, emit, &row, event.ActionHide, row.removedReason, 0, 0)
	}
	err = s.ob.Transact(ctx, func(tx *sql.Tx, emit outbox.Emit) error {
		if err := key.Claim(ctx, tx, t.boardID); err != nil {
			return err
		}
		if err := file(tx, emit); err != nil {
			return err
		}
		return key.Record(ctx, tx, toReportJSON(r))
	})
	if err != nil {
		return Report{}, err
	}
	return r, nil
}

// pendingReason is what is shown in place of a target hidden by n reports.
func pendingReason(n int64, counts map[Reason]int64) string {
	reasons := make([]Reason, 0, len(counts))
	for r := range counts {
		reasons = append(reasons, r)
	}
	slices.SortFunc(reasons, func(a, b Reason) int {
		return cmp.Or(cmp.Compare(counts[b], counts[a]), cmp.Compare(slices.Index(Reasons, a), slices.Index(Reasons, b)))
	})
	parts := make([]string, len(reasons))
	for i, r := range reasons {
		parts[i] = fmt.Sprintf("%s %d", r, counts[r])
	}
	return fmt.Sprintf("hidden pending review after %d reports (%s)", n, strings.Join(parts, ", "))
}

// reasonCounts counts a target's open reports by reason.
func reasonCounts(ctx context.Context, tx *sql.Tx, typ TargetType, id, boardID int64) (map[Reason]int64, error) {
	rows, err := tx.QueryContext(ctx, "SELECT reason, COUNT(*) FROM report WHERE board_id = ? AND target_type = ? AND target_id = ? AND resolution_id = 0 GROUP BY reason",
		boardID, string(typ), id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	counts := map[Reason]int64{}
	for rows.Next() {
		var r string
		var n int64
		if err := rows.Scan(&r, &n); err != nil {
			return nil, err
		}
		counts[Reason(r)] = n
	}
	return counts, rows.Err()
}

// Queue returns a page of the targets with open reports, oldest first report first, and how many there are.
func (s *Service) Queue(ctx context.Context, page, pageSize int64) ([]Queued, int64, error) {
	var count int64
	if err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM moderation_target WHERE queued_at IS NOT NULL").Scan(&count); err != nil {
		return nil, 0, err
	}
	rows, err := s.db.QueryContext(ctx, "SELECT "+targetColumns+" FROM moderation_target WHERE queued_at IS NOT NULL "+
		"ORDER BY queued_at, target_type, target_id LIMIT ? OFFSET ?", pageSize, (page-1)*pageSize)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	var out []Queued
	ids := []int64{}
	for rows.Next() {
		t, err := scanTarget(rows)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, Queued{TargetType: t.typ, TargetID: t.id, BoardID: t.boardID, ArticleID: t.articleID, Excerpt: t.excerpt,
			WriterID: t.writerID, ReportCount: t.openReports, Reasons: map[Reason]int64{}, FirstReportedAt: t.queuedAt.Time, Hidden: t.hidden})
		ids = append(ids, t.id)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	if len(out) == 0 {
		return []Queued{}, count, nil
	}
	in, args := sqldb.In("target_id", ids)
	reasons, err := s.db.QueryContext(ctx, "SELECT target_type, target_id, reason, COUNT(*) FROM report WHERE resolution_id = 0 AND "+in+
		" GROUP BY target_type, target_id, reason", args...)
	if err != nil {
		return nil, 0, err
	}
	defer reasons.Close()
	for reasons.Next() {
		var typ, reason string
		var id, n int64
		if err := reasons.Scan(&typ, &id, &reason, &n); err != nil {
			return nil, 0, err
		}
		for i := range out {
			if out[i].TargetType == TargetType(typ) && out[i].TargetID == id {
				out[i].Reasons[Reason(reason)] = n
			}
		}
	}
	return out, count, reasons.Err()
}

// Resolve closes every open report of a target and returns how many. Remove hides the target with reason shown in
// its place; Dismiss shows again a target that the reports hid (one a moderator removed stays removed).
//
// Only a target with open reports is resolved (404 NO_OPEN_REPORTS otherwise): a moderator who wants something gone
// that nobody reported deletes it, as moderators may delete any article or comment; keeping resolutions to reports
// keeps one way to hide content and one meaning for "removed".
func (s *Service) Resolve(ctx context.Context, moderatorID int64, typ TargetType, targetID int64, action, reason string) (int64, error) {
	resolution, err := s.nextID()
	if err != nil {
		return 0, err
	}
	noReports := fault.NotFoundf("NO_OPEN_REPORTS", "%s %d has no open reports", typ, targetID)
	board, err := s.boardOf(ctx, typ, targetID)
	if errors.Is(err, errNoTarget) {
		return 0, noReports
	} else if err != nil {
		return 0, err
	}
	var resolved int64
	err = s.ob.Transact(ctx, func(tx *sql.Tx, emit outbox.Emit) error {
		row, err := s.lockTarget(ctx, tx, typ, targetID, board)
		if err != nil && !errors.Is(err, errNoTarget) {
			return err
		}
		if errors.Is(err, errNoTarget) || row.openReports == 0 {
			return noReports
		}
		res, err := tx.ExecContext(ctx, "UPDATE report SET resolution_id = ? WHERE board_id = ? AND target_type = ? AND target_id = ? AND resolution_id = 0",
			resolution, board, string(typ), targetID)
		if err != nil {
			return err
		}
		if resolved, err = res.RowsAffected(); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "UPDATE moderation_target SET open_reports = 0, queued_at = NULL WHERE board_id = ? AND target_type = ? AND target_id = ?",
			board, string(typ), targetID); err != nil {
			return err
		}
		switch {
		case action == Remove:
			row.hidden, row.removedReason = event.Removed, reason
			return s.change(ctx, tx, emit, &row, event.ActionRemove, reason, moderatorID, resolution)
		case row.hidden == event.Pending:
			row.hidden, row.removedReason = event.Visible, ""
			return s.change(ctx, tx, emit, &row, event.ActionRestore, reason, moderatorID, resolution)
		}
		return s.log(ctx, tx, board, LogEntry{Action: actionDismiss, TargetType: typ, TargetID: targetID, ArticleID: row.articleID,
			ModeratorID: moderatorID, Reason: reason, ResolutionID: resolution})
	})
	return resolved, err
}

// Log returns a page of the moderation log, newest first; withReports (for moderators) adds the reports each
// resolution on the page closed, with their reporters.
func (s *Service) Log(ctx context.Context, page, pageSize int64, withReports bool) ([]LogEntry, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT action, target_type, target_id, article_id, moderator_id, reason, created_at, resolution_id FROM modlog "+
		"ORDER BY log_id DESC LIMIT ? OFFSET ?", pageSize, (page-1)*pageSize)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []LogEntry{}
	for rows.Next() {
		var e LogEntry
		var typ string
		if err := rows.Scan(&e.Action, &typ, &e.TargetID, &e.ArticleID, &e.ModeratorID, &e.Reason, &e.CreatedAt, &e.ResolutionID); err != nil {
			return nil, err
		}
		e.TargetType, e.CreatedAt = TargetType(typ), e.CreatedAt.UTC()
		out = append(out, e)
	}
	if err := rows.Err(); err != nil || !withReports {
		return out, err
	}
	return out, s.closedReports(ctx, out)
}

// closedReports fills in the reports each resolution among es closed, with one query for the page.
func (s *Service) closedReports(ctx context.Context, es []LogEntry) error {
	at := map[int64]int{} // resolution id -> index in es
	args := []any{}
	for i, e := range es {
		if e.ResolutionID != 0 {
			at[e.ResolutionID] = i
			args = append(args, e.ResolutionID)
		}
	}
	if len(args) == 0 {
		return nil
	}
	rows, err := s.db.QueryContext(ctx, "SELECT resolution_id, reporter_id, reason, text FROM report WHERE resolution_id IN (?"+
		strings.Repeat(", ?", len(args)-1)+") ORDER BY report_id", args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var resolution int64
		var r LoggedReport
		var reason string
		if err := rows.Scan(&resolution, &r.ReporterID, &reason, &r.Text); err != nil {
			return err
		}
		r.Reason = Reason(reason)
		es[at[resolution]].Reports = append(es[at[resolution]].Reports, r)
	}
	return rows.Err()
}

func targetNotFound(typ TargetType, id int64) error {
	return fault.NotFoundf("TARGET_NOT_FOUND", "%s %d does not exist", typ, id)
}
