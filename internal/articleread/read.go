package articleread

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"board/internal/event"
	"board/internal/redislock"
	"board/internal/snowflake"
)

// model is what Redis holds of an article's query model; a nil part is not held. The moderation state is no part
// of a complete model: an article without one was never moderated, as far as events and its origin have said.
type model struct {
	article  *versioned[articleJSON]
	comments *versioned[int64]
	likes    *versioned[int64]
	mod      *versioned[Moderation]
	deleted  bool
}

// moderation is the model's moderation state: none held is none.
func (m model) moderation() Moderation {
	if m.mod == nil {
		return Moderation{}
	}
	mod := m.mod.Value
	mod.Version = m.mod.Version
	return mod
}

func (m model) complete() bool {
	return m.deleted || m.article != nil && m.comments != nil && m.likes != nil
}

var modelFields = []string{"article", "av", "comments", "cv", "likes", "lv", "deleted", "article?", "comments?", "likes?",
	"mod", "mv"}

// parseModel reads the values of modelFields, field(i) giving the i-th if the hash holds it. A group marked
// unverified, or an article stored in another version's format, counts as not held.
func parseModel(field func(i int) (string, bool)) (model, error) {
	var m model
	if _, ok := field(6); ok {
		return model{deleted: true}, nil
	}
	num := func(i int) (int64, bool, error) {
		v, ok := field(i)
		if !ok {
			return 0, false, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		return n, true, err
	}
	_, unverifiedArticle := field(7)
	if raw, ok := field(0); ok && !unverifiedArticle && isArticleJSON(raw) {
		av, _, err := num(1)
		if err != nil {
			return m, err
		}
		m.article = &versioned[articleJSON]{articleJSON(raw), av}
	}
	for _, part := range []struct {
		value, version, unverified int
		dst                        **versioned[int64]
	}{{2, 3, 8, &m.comments}, {4, 5, 9, &m.likes}} {
		if _, ok := field(part.unverified); ok {
			continue
		}
		n, ok, err := num(part.value)
		if err != nil || !ok {
			if err != nil {
				return m, err
			}
			continue
		}
		v, _, err := num(part.version)
		if err != nil {
			return m, err
		}
		*part.dst = &versioned[int64]{n, v}
	}
	if raw, ok := field(10); ok {
		mv, _, err := num(11)
		if err != nil {
			return m, err
		}
		var mod Moderation
		if err := json.Unmarshal([]byte(raw), &mod); err != nil {
			return m, err
		}
		m.mod = &versioned[Moderation]{mod, mv}
	}
	if m.article != nil && m.moderation().Hidden == event.Visible && m.article.Value.masked() {
		m.article = nil // read from the article service while hidden, and restored since: read it again
	}
	return m, nil
}

// cachedView is an article's view count as the view cache holds it: none (not cached), or a count with its logical
// expiry, past which it is due for a refresh (ViewCounts.Fresh).
type cachedView struct {
	count, expiry int64
	cached        bool
}

// readModels reads the models of ids and their cached view counts in one round trip (one per node of a cluster);
// through the near cache, what it holds costs none, and what the memo holds already decoded costs a lookup. until
// is when the first of what it read leaves the near cache (Unix ms; 0 without a near cache).
func (s *Service) readModels(ctx context.Context, ids []int64) (models []model, views []cachedView, until int64, err error) {
	models, views = make([]model, len(ids)), make([]cachedView, len(ids))
	// The keys the memo lacks, read in one round trip: a model's at 2i, a view count's at 2i+1.
	type read struct {
		at  int
		key string
		gen uint64
	}
	var reads []read
	var cmds []rueidis.CacheableTTL
	now, memo := time.Now(), s.cfg.Memo
	expire := func(at int64) {
		if until == 0 || at < until {
			until = at
		}
	}
	for i, id := range ids {
		for at, key := range [2]string{s.modelKey(id), s.views.EntryKey(viewKey(id))} {
			if memo != nil {
				if v, expireAt, ok := memo.Get(key, now); ok {
					expire(expireAt)
					if at == 0 {
						models[i] = v.(model)
					} else {
						views[i] = v.(cachedView)
					}
					continue
				}
			}
			r := read{at: 2*i + at, key: key}
			cmd := s.reads.B().Get().Key(key).Cache()
			if at == 0 {
				cmd = s.reads.B().Hmget().Key(key).Field(modelFields...).Cache()
			}
			if memo != nil {
				r.gen = memo.Generation(key)
			}
			reads, cmds = append(reads, r), append(cmds, rueidis.CT(cmd, nearTTL))
		}
	}
	if len(cmds) == 0 {
		return models, views, until, nil
	}
	results := s.reads.DoMultiCache(ctx, cmds...) // without a near cache, rueidis sends them as DoMulti
	for j, r := range reads {
		i := r.at / 2
		if r.at%2 == 1 {
			raw, err := results[j].ToString() // "" when not cached: then loaded through the view cache
			views[i] = s.cachedView(raw)
			if memo != nil && (err == nil || rueidis.IsRedisNil(err)) {
				memo.Put(r.key, r.gen, views[i], len(raw), results[j].CachePXAT())
				expire(results[j].CachePXAT())
			}
			continue
		}
		vals, err := results[j].ToArray()
		if err != nil {
			return nil, nil, 0, redisFault(err)
		}
		size := 0
		m, err := parseModel(func(j int) (string, bool) { v, err := vals[j].ToString(); size += len(v); return v, err == nil })
		if err != nil {
			return nil, nil, 0, fmt.Errorf("model of article %d: %w", ids[i], err)
		}
		models[i] = m
		if memo != nil {
			memo.Put(r.key, r.gen, m, size, results[j].CachePXAT())
			expire(results[j].CachePXAT())
		}
	}
	return models, views, until, nil
}

// cachedView decodes a view count as the view cache holds it in Redis ("": not held).
func (s *Service) cachedView(raw string) (v cachedView) {
	if raw != "" {
		v.count, v.expiry, v.cached = s.views.Cached(raw)
	}
	return v
}

// Get returns an article with its counts.
func (s *Service) Get(ctx context.Context, id int64) (ArticleRead, error) {
	list, _, err := s.withCounts(ctx, []int64{id}, nil, nil)
	if err != nil {
		return ArticleRead{}, err
	}
	if len(list) == 0 {
		return ArticleRead{}, errArticleNotFound
	}
	return list[0], nil
}

func viewKey(id int64) string { return "view-count::" + strconv.FormatInt(id, 10) }

func (s *Service) viewCount(ctx context.Context, id int64) (int64, error) {
	return s.views.Get(ctx, viewKey(id), func(ctx context.Context) (int64, error) {
		return s.origins.viewCount(ctx, id)
	})
}

// rebuild completes the model of article id from the origins and writes what it fetched back, collapsing
// concurrent rebuilds of one article: into one in this process (singleflight), and across processes behind a short
// Redis lock whose holder the others wait for. known, when not nil, is the article as a page of the article service
// gave it, which spares the article call.
func (s *Service) rebuild(ctx context.Context, id int64, known *knownArticle) (model, error) {
	ch := s.rebuilds.DoChan(strconv.FormatInt(id, 10), func() (any, error) {
		// Shared by every caller, so not ended by the first one leaving: bounded on its own.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rebuildTimeout)
		defer cancel()
		return s.rebuildOnce(ctx, id, known)
	})
	select {
	case <-ctx.Done():
		return model{}, ctx.Err()
	case r := <-ch:
		if r.Err != nil {
			return model{}, r.Err
		}
		return r.Val.(model), nil
	}
}

func (s *Service) rebuildOnce(ctx context.Context, id int64, known *knownArticle) (model, error) {
	lock := s.modelKey(id) + "::rebuild"
	held, err := redislock.TryAcquire(ctx, s.rdb, lock, rebuildLockTTL)
	if err != nil {
		return model{}, redisFault(err)
	}
	if held != nil {
		defer func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
			defer cancel()
			_ = held.Release(rctx) // else it expires in rebuildLockTTL
		}()
	} else if m, ok := s.awaitRebuild(ctx, id, lock); ok {
		return m, nil
	}
	models, _, _, err := s.readModels(ctx, []int64{id})
	if err != nil {
		return model{}, err
	}
	m := models[0]
	if m.complete() {
		return m, nil
	}
	groups, err := s.fetchMissing(ctx, id, &m, known)
	if err != nil {
		if errors.Is(err, errArticleNotFound) {
			s.markDeleted(ctx, id)
		}
		return model{}, err
	}
	if err := s.writeRebuilt(ctx, id, groups); err != nil {
		return model{}, err
	}
	return m, nil
}

// awaitRebuild waits while another process holds the rebuild lock of article id, and returns the model once it is
// complete; ok is false when the lock went away (or expired) without a complete model, or ctx ended.
func (s *Service) awaitRebuild(ctx context.Context, id int64, lock string) (model, bool) {
	for {
		select {
		case <-ctx.Done():
			return model{}, false
		case <-time.After(rebuildWaitPoll):
		}
		models, _, _, err := s.readModels(ctx, []int64{id})
		if err == nil && models[0].complete() {
			return models[0], true
		}
		if n, err := s.rdb.Exists(ctx, lock).Result(); err != nil || n == 0 {
			return model{}, false
		}
	}
}

// fetchMissing fills the parts m lacks from their origins, concurrently, and returns what it fetched as
// modelScript's field groups. A page's article (known) fills the answer but is not written back: it carries no
// version, and a version is what keeps a late event from overwriting it. An article read from the article service
// brings its moderation state too, written back with the version the service tells (0, older than any event,
// when it tells none).
func (s *Service) fetchMissing(ctx context.Context, id int64, m *model, known *knownArticle) ([]any, error) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	var groups []any
	fetch := func(fn func() (group []any, err error)) {
		wg.Go(func() {
			group, err := fn()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			groups = append(groups, group...)
		})
	}
	switch {
	case m.article == nil && known != nil:
		m.article = &versioned[articleJSON]{Value: known.article}
		if m.mod == nil {
			m.mod = &versioned[Moderation]{known.mod, known.mod.Version}
		}
	case m.article == nil:
		// First, alone: an article the origin does not have needs no counts.
		a, err := s.origins.article(ctx, id)
		if err != nil {
			return nil, asNotFound(err)
		}
		raw, err := encodeArticle(a.Value.Article)
		if err != nil {
			return nil, err
		}
		m.article = &versioned[articleJSON]{raw, a.Version}
		groups = append(groups, "article", "av", max(a.Version, 0), string(raw))
		if mv := a.Value.ModerationVersion; m.mod == nil || mv > m.mod.Version {
			mod, err := json.Marshal(a.Value.Moderation)
			if err != nil {
				return nil, err
			}
			m.mod = &versioned[Moderation]{a.Value.Moderation, mv}
			groups = append(groups, "mod", "mv", max(mv, 0), string(mod))
		}
	}
	if m.comments == nil {
		fetch(func() ([]any, error) {
			c, err := s.origins.commentCount(ctx, id)
			m.comments = &c
			return []any{"comments", "cv", max(c.Version, 0), c.Value}, err
		})
	}
	if m.likes == nil {
		fetch(func() ([]any, error) {
			l, err := s.origins.likeCount(ctx, id)
			m.likes = &l
			return []any{"likes", "lv", max(l.Version, 0), l.Value}, err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		if errors.Is(err, errArticleNotFound) {
			return nil, errArticleNotFound
		}
		return nil, err
	}
	return groups, nil
}

// markDeleted leaves a tombstone for an article its origin does not have, so that late events cannot bring it back
// and reads stop asking; not for an id from the future, which a real article may still get. Best effort: without
// it, the next read asks the origin again.
func (s *Service) markDeleted(ctx context.Context, id int64) {
	now := s.cfg.Now()
	if snowflake.Timestamp(id).After(now) {
		return
	}
	keep := max(keepUntil(id).UnixMilli(), now.Add(notFoundTTL).UnixMilli())
	_ = modelScript.Run(ctx, s.rdb, []string{s.modelKey(id)}, keep, now.UnixMilli(), "1", "deleted", 0).Err()
}

// writeRebuilt writes field groups fetched from the origins through the model script, each only if at least as new
// as what events wrote meanwhile (which verifies a group an untrusted event wrote), and keeps the model a day from
// now, at least until a day after the article's creation.
func (s *Service) writeRebuilt(ctx context.Context, id int64, groups []any) error {
	if len(groups) == 0 {
		return nil
	}
	now := s.cfg.Now()
	keep := max(keepUntil(id).UnixMilli(), now.Add(ModelTTL).UnixMilli())
	args := append([]any{keep, now.UnixMilli(), "1"}, groups...)
	if err := modelScript.Run(ctx, s.rdb, []string{s.modelKey(id)}, args...).Err(); err != nil {
		return redisFault(err)
	}
	return nil
}

// withCounts turns articles into ArticleReads: their models and cached view counts, read in one pipeline; what is
// missing (a model to rebuild, a view count to load or refresh) is fetched concurrently. An article that turns out
// deleted (since the list was read, or listed by a late event) is left out of the answer and returned in gone. It
// notes in w (when not nil) whether the near cache answered everything.
func (s *Service) withCounts(ctx context.Context, ids []int64, known []knownArticle, w *warmth) (list []ArticleRead, gone []int64, err error) {
	models, views, until, err := s.readModels(ctx, ids)
	if err != nil {
		return nil, nil, err
	}
	if len(ids) > 0 {
		w.read(until)
	}
	out := make([]ArticleRead, len(ids))
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		m := models[i]
		if known != nil && m.article == nil && m.comments != nil && m.likes != nil && !m.deleted {
			m.article = &versioned[articleJSON]{Value: known[i].article} // the page gave what the model lacks
			if m.mod == nil {
				m.mod = &versioned[Moderation]{known[i].mod, known[i].mod.Version}
			}
		}
		if views[i].cached && m.complete() && !m.deleted {
			out[i] = ArticleRead{Article: m.article.Value, Moderation: m.moderation(), CommentCount: m.comments.Value,
				LikeCount: m.likes.Value, ViewCount: views[i].count}
			fresh := s.views.Fresh(views[i].expiry)
			w.view(views[i].expiry, fresh)
			if !fresh {
				// Served as it is while it is refreshed: a page of many articles would otherwise wait, more often
				// than not, for one of their counts.
				s.views.RefreshSoon(viewKey(id), func(ctx context.Context) (int64, error) {
					return s.origins.viewCount(ctx, id)
				})
			}
			continue
		}
		w.cold()
		wg.Go(func() {
			if !m.complete() {
				var k *knownArticle
				if known != nil {
					k = &known[i]
				}
				if m, errs[i] = s.rebuild(ctx, id, k); errs[i] != nil {
					return
				}
			}
			if m.deleted {
				errs[i] = errArticleNotFound
				return
			}
			views, err := s.viewCount(ctx, id)
			out[i], errs[i] = ArticleRead{Article: m.article.Value, Moderation: m.moderation(),
				CommentCount: m.comments.Value, LikeCount: m.likes.Value, ViewCount: views}, err
		})
	}
	wg.Wait()
	list = out[:0]
	for i := range out {
		switch {
		case errors.Is(errs[i], errArticleNotFound):
			gone = append(gone, ids[i])
		case errs[i] != nil:
			return nil, nil, errs[i]
		default:
			list = append(list, out[i])
		}
	}
	return list, gone, nil
}

// warmth is what the reads of one answer say of keeping it whole in the memo: whether anything was read past the
// near cache, when the first key read leaves it (Unix ms), the first logical expiry of its fresh view counts, and
// whether one was due (its refresh started). A nil warmth notes nothing.
type warmth struct {
	missed, due  bool
	until, views int64
}

// read notes keys read from the near cache until the instant until (0: not from a near cache).
func (w *warmth) read(until int64) {
	switch {
	case w == nil:
	case until <= 0:
		w.missed = true
	case w.until == 0 || until < w.until:
		w.until = until
	}
}

// view notes a view count served, of that logical expiry, fresh or due.
func (w *warmth) view(expiry int64, fresh bool) {
	switch {
	case w == nil:
	case !fresh:
		w.due = true
	case w.views == 0 || expiry < w.views:
		w.views = expiry
	}
}

// cold notes something read past the near cache, or due for a refresh.
func (w *warmth) cold() {
	if w != nil {
		w.missed = true
	}
}

// warm reports whether the answer may be kept.
func (w *warmth) warm() bool { return !w.missed && w.until > 0 }
