package bench

import (
	"bytes"
	"testing"

	"board/internal/app"
)

// The list benchmarks' deep cases fit the seeded data unless told otherwise, and refuse to time past its end.
func TestListBenchFlagsFitTheData(t *testing.T) {
	for _, tc := range []struct {
		args                []string
		rows                int64
		wantPage, wantDepth int64
		wantErr             bool
	}{
		{nil, 12_000_000, defaultBenchPage, defaultBenchDepth, false},
		{nil, 1000, 34, 500, false},
		{[]string{"--page-size", "10"}, 1000, 100, 500, false},
		{[]string{"--page", "3"}, 1000, 3, 500, false},
		{[]string{"--page", "35"}, 1000, 0, 0, true},
		{[]string{"--depth", "1000"}, 1000, 0, 0, true},
		{nil, 1, 0, 0, true},
	} {
		fs := app.NewFlagSet("bench", "Usage", &bytes.Buffer{})
		lf := newListBenchFlags(fs, "rows")
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		err := lf.fit(tc.rows, "board 1", "board seed", &bytes.Buffer{})
		if (err != nil) != tc.wantErr {
			t.Errorf("%q on %d rows: error %v, want error %v", tc.args, tc.rows, err, tc.wantErr)
			continue
		}
		if !tc.wantErr && (*lf.page != tc.wantPage || *lf.depth != tc.wantDepth) {
			t.Errorf("%q on %d rows: page %d, depth %d; want %d, %d", tc.args, tc.rows, *lf.page, *lf.depth,
				tc.wantPage, tc.wantDepth)
		}
	}
}
