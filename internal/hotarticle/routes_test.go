package hotarticle

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"board/internal/httpio/httpiotest"
	"board/internal/redisclient/redisclienttest"
	"board/internal/snowflake"
)

const dayPath = "/v1/hot-articles/articles/date/"

func (f *fixture) handler() http.Handler {
	return httpiotest.Handler("hot-article", Routes(f.svc, httpiotest.Logger))
}

// hotMap is the exact JSON object a HotArticle is written as.
func hotMap(id int64, title, createdAt string, score, likes, comments, views int64) map[string]any {
	n := func(v int64) json.Number { return json.Number(fmt.Sprint(v)) }
	return map[string]any{"articleId": fmt.Sprint(id), "title": title, "createdAt": createdAt, "score": n(score),
		"likeCount": n(likes), "commentCount": n(comments), "viewCount": n(views)}
}

func TestRoutes(t *testing.T) {
	t.Parallel()
	seoul, err := time.LoadLocation("Asia/Seoul")
	if err != nil {
		t.Fatal(err)
	}
	redisclienttest.Run(t, func(t *testing.T, b redisclienttest.Backend) {
		f := newFixture(t, b, seoul)
		h := f.handler()
		start := f.dayStart(-1)
		day := dayName(start, seoul)
		at := start.Add(time.Hour + 2*time.Millisecond) // 01:00:00.002 in Seoul is 16:00:00.002 UTC the day before
		top := snowflake.Compose(at, 3, 1)
		other := snowflake.Compose(at, 3, 0)
		f.apply(created(top, 1, `제목 "quoted" <b>`), liked(top, 2, 2), commented(top, 1, 1), viewed(top, 4),
			created(other, 1, "other"))
		for i := range 10 { // twelve articles in all, so the answer is cut at ten
			id := snowflake.Compose(at.Add(time.Minute), 4, int64(i))
			f.apply(created(id, 1, fmt.Sprint("filler ", i)))
		}
		f.apply(viewed(other, 1))

		r := httpiotest.Call(h, "GET", dayPath+day, "")
		httpiotest.WantStatus(t, r, http.StatusOK)
		got, ok := httpiotest.DecodeJSON(t, r.Body).([]any)
		if !ok || len(got) != ListSize {
			t.Fatalf("body %s: want a JSON array of %d", r.Body, ListSize)
		}
		createdAt := at.UTC().Format("2006-01-02T15:04:05.000Z")
		if !httpiotest.TimeFormat.MatchString(createdAt) || !strings.HasSuffix(createdAt, "T16:00:00.002Z") {
			t.Fatalf("test setup: createdAt %s", createdAt)
		}
		want := []any{hotMap(top, `제목 "quoted" <b>`, createdAt, 12, 2, 1, 4), hotMap(other, "other", createdAt, 1, 0, 0, 1)}
		if diff := cmp.Diff(want, got[:2]); diff != "" {
			t.Errorf("GET %s (-want +got):\n%s", day, diff)
		}
		filler := got[2].(map[string]any)
		if filler["title"] != "filler 9" || filler["score"] != json.Number("0") {
			t.Errorf("third entry = %v, want the newest zero-score article, filler 9", filler)
		}

		// Days nothing was created on answer an empty array, not null.
		for _, d := range []string{dayName(f.dayStart(0), seoul), dayName(f.dayStart(1), seoul), dayName(f.dayStart(-30), seoul),
			dayName(snowflake.Epoch, seoul)} {
			r := httpiotest.Call(h, "GET", dayPath+d, "")
			httpiotest.WantStatus(t, r, http.StatusOK)
			if body := strings.TrimSpace(r.Body); body != "[]" {
				t.Errorf("GET %s: body %s, want []", d, body)
			}
		}
	})
}

func TestRoutesBadDates(t *testing.T) {
	t.Parallel()
	seoul, err := time.LoadLocation("Asia/Seoul")
	if err != nil {
		t.Fatal(err)
	}
	b := redisclienttest.Mini(t)
	f := newFixture(t, b, seoul)
	h := f.handler()
	today := f.dayStart(0)
	for _, tc := range []struct {
		date, code string
	}{
		{"2026-13-01", "INVALID_DATE"},
		{"20261301", "INVALID_DATE"},
		{"20260001", "INVALID_DATE"},
		{"20260100", "INVALID_DATE"},
		{"abc", "INVALID_DATE"},
		{"2026021", "INVALID_DATE"},
		{"202602011", "INVALID_DATE"},
		{"20260230", "INVALID_DATE"},
		{"20250229", "INVALID_DATE"},
		{"2026-02-01", "INVALID_DATE"},
		{"%2020260201", "INVALID_DATE"},
		{"+2026020", "INVALID_DATE"},
		{"-2026020", "INVALID_DATE"},
		{"\u0662\u0660\u0662\u0666\u0660\u0662\u0660\u0661", "INVALID_DATE"}, // Arabic-Indic digits
		{dayName(today.AddDate(100, 0, 0), seoul), "DATE_OUT_OF_RANGE"},
		{dayName(today.AddDate(-100, 0, 0), seoul), "DATE_OUT_OF_RANGE"},
		{dayName(today.AddDate(0, 0, 2), seoul), "DATE_OUT_OF_RANGE"},
		{"20231231", "DATE_OUT_OF_RANGE"}, // the day before the first Snowflake id, in Seoul
		{"99991231", "DATE_OUT_OF_RANGE"},
		{"00010101", "DATE_OUT_OF_RANGE"},
	} {
		t.Run(tc.date, func(t *testing.T) {
			httpiotest.WantError(t, httpiotest.Call(h, "GET", dayPath+tc.date, ""), http.StatusBadRequest, tc.code)
		})
	}
	httpiotest.WantError(t, httpiotest.Call(h, "POST", dayPath+dayName(today, seoul), ""),
		http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED")
	httpiotest.WantError(t, httpiotest.Call(h, "GET", dayPath, ""), http.StatusNotFound, "NOT_FOUND")
	if keys := f.keys(); len(keys) != 0 {
		t.Errorf("bad requests wrote %v", keys)
	}
}

func TestRoutesRedisDown(t *testing.T) {
	t.Parallel()
	for name, client := range downClients(t) {
		t.Run(name, func(t *testing.T) {
			now := time.Now()
			svc := NewService(client(t), Config{KeyPrefix: "test:", Location: time.UTC, Now: func() time.Time { return now }})
			h := httpiotest.Handler("hot-article", Routes(svc, httpiotest.Logger))
			r := httpiotest.Call(h, "GET", dayPath+dayName(now, time.UTC), "")
			httpiotest.WantError(t, r, http.StatusServiceUnavailable, "REDIS_UNAVAILABLE")
		})
	}
}
