package apijson

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestIDMarshal(t *testing.T) {
	for _, tc := range []struct {
		id   ID
		want string
	}{
		{0, `"0"`},
		{1, `"1"`},
		{1 << 53, `"9007199254740992"`},
		{math.MaxInt64, `"9223372036854775807"`},
	} {
		t.Run(tc.want, func(t *testing.T) {
			got, err := json.Marshal(tc.id)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("json.Marshal(ID(%d)) (-want +got):\n%s", int64(tc.id), diff)
			}
			if got, want := tc.id.String(), strconv.FormatInt(int64(tc.id), 10); got != want {
				t.Errorf("String() = %q, want %q", got, want)
			}
		})
	}
}

func TestIDMarshalInStruct(t *testing.T) {
	v := struct {
		A ID  `json:"a"`
		B *ID `json:"b"`
	}{A: 7}
	got, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(`{"a":"7","b":null}`, string(got)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestIDUnmarshal(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		want    ID
		wantErr bool
	}{
		{"string", `"123"`, 123, false},
		{"number", `123`, 123, false},
		{"zero number", `0`, 0, false},
		{"zero string", `"0"`, 0, false},
		{"max as string", `"9223372036854775807"`, math.MaxInt64, false},
		{"max as number", `9223372036854775807`, math.MaxInt64, false},
		{"above 2^53 as number", `9007199254740993`, 9007199254740993, false},
		{"escaped string", `"\u0031\u0032"`, 12, false},
		{"negative number", `-1`, 0, true},
		{"negative string", `"-1"`, 0, true},
		{"float", `1.5`, 0, true},
		{"integral float", `1.0`, 0, true},
		{"exponent", `1e3`, 0, true},
		{"float string", `"1.5"`, 0, true},
		{"overflow number", `9223372036854775808`, 0, true},
		{"overflow string", `"9223372036854775808"`, 0, true},
		{"huge", `123456789012345678901234567890`, 0, true},
		{"garbage string", `"abc"`, 0, true},
		{"empty string", `""`, 0, true},
		{"string null", `"null"`, 0, true},
		{"spaces in string", `" 1"`, 0, true},
		{"trailing space in string", `"1 "`, 0, true},
		{"plus sign in string", `"+1"`, 0, true},
		{"leading zeros in string", `"007"`, 0, true},
		{"zero with a leading zero", `"00"`, 0, true},
		{"minus zero", `-0`, 0, true},
		{"minus zero string", `"-0"`, 0, true},
		{"bool", `true`, 0, true},
		{"object", `{}`, 0, true},
		{"array", `[1]`, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v struct {
				ID ID `json:"id"`
			}
			err := json.Unmarshal([]byte(`{"id":`+tc.in+`}`), &v)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Unmarshal(%s) error = %v, want error: %v", tc.in, err, tc.wantErr)
			}
			if err == nil {
				if diff := cmp.Diff(tc.want, v.ID); diff != "" {
					t.Errorf("Unmarshal(%s) (-want +got):\n%s", tc.in, diff)
				}
			}
		})
	}
}

func TestIDUnmarshalNull(t *testing.T) {
	id := ID(42)
	if err := json.Unmarshal([]byte(`null`), &id); err != nil {
		t.Fatal(err)
	}
	if id != 42 {
		t.Errorf("null changed the id to %d", id)
	}
	var v struct {
		ID  ID  `json:"id"`
		Ptr *ID `json:"ptr"`
	}
	if err := json.Unmarshal([]byte(`{"id":null,"ptr":null}`), &v); err != nil {
		t.Fatal(err)
	}
	if v.ID != 0 || v.Ptr != nil {
		t.Errorf("null: got id %d, ptr %v; want 0, nil", v.ID, v.Ptr)
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"0", 0, false},
		{"42", 42, false},
		{"9223372036854775807", math.MaxInt64, false},
		{"9223372036854775808", 0, true},
		{"-1", 0, true},
		{"", 0, true},
		{"abc", 0, true},
		{"1.5", 0, true},
		{"0x10", 0, true},
		{"+1", 0, true},
		{"007", 0, true},
		{"00", 0, true},
		{"-0", 0, true},
		{" 1", 0, true},
		{"1 ", 0, true},
		{"1_000", 0, true},
		{"١", 0, true}, // an Arabic-Indic digit one
	} {
		got, err := Parse(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("Parse(%q) error = %v, want error: %v", tc.in, err, tc.wantErr)
			continue
		}
		if got != tc.want {
			t.Errorf("Parse(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"0", "1", "007", "+1", "-0", "9223372036854775807", "9223372036854775808", " 1", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := Parse(s)
		if err != nil {
			return
		}
		if back := strconv.FormatInt(v, 10); back != s || v < 0 {
			t.Fatalf("Parse(%q) = %d, which is written %q: an id accepted in more than one spelling", s, v, back)
		}
	})
}

// A bad id in a struct field is a *json.UnmarshalTypeError naming the field (httpio.Decode reports it by name).
func TestIDUnmarshalErrorNamesTheField(t *testing.T) {
	var v struct {
		Outer struct {
			ArticleID *ID `json:"articleId"`
		} `json:"outer"`
	}
	long := `"` + strings.Repeat("9", 60) + `"`
	for in, wantValue := range map[string]string{`"+1"`: `"+1"`, `-1`: `-1`, `{"a":1}`: `{"a":1}`,
		long: long[:40] + "…"} {
		err := json.Unmarshal([]byte(`{"outer":{"articleId":`+in+`}}`), &v)
		var typeErr *json.UnmarshalTypeError
		if !errors.As(err, &typeErr) {
			t.Fatalf("%s: error %v is not a *json.UnmarshalTypeError", in, err)
		}
		if diff := cmp.Diff([]string{"outer.articleId", wantValue}, []string{typeErr.Field, typeErr.Value}); diff != "" {
			t.Errorf("%s: field, value (-want +got):\n%s", in, diff)
		}
		if typeErr.Type != reflect.TypeFor[ID]() {
			t.Errorf("%s: type = %v, want apijson.ID", in, typeErr.Type)
		}
	}
}

func TestTimeMarshal(t *testing.T) {
	seoul := time.FixedZone("KST", 9*60*60)
	for _, tc := range []struct {
		name string
		in   time.Time
		want string
	}{
		{"utc with ms", time.Date(2026, 1, 2, 3, 4, 5, 6_000_000, time.UTC), `"2026-01-02T03:04:05.006Z"`},
		{"zero ms", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), `"2026-01-02T03:04:05.000Z"`},
		{"sub-ms truncated", time.Date(2026, 1, 2, 3, 4, 5, 123_999_999, time.UTC), `"2026-01-02T03:04:05.123Z"`},
		{"non-utc converted", time.Date(2026, 1, 2, 3, 4, 5, 60_000_000, seoul), `"2026-01-01T18:04:05.060Z"`},
		{"local zone converted", time.Date(2026, 7, 1, 0, 0, 0, 0, time.FixedZone("", -5*60*60)), `"2026-07-01T05:00:00.000Z"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := json.Marshal(Time(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestTimeUnmarshal(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		want    time.Time
		wantErr bool
	}{
		{"ms", `"2026-01-02T03:04:05.006Z"`, time.Date(2026, 1, 2, 3, 4, 5, 6_000_000, time.UTC), false},
		{"offset to utc", `"2026-01-02T12:04:05.006+09:00"`, time.Date(2026, 1, 2, 3, 4, 5, 6_000_000, time.UTC), false},
		{"no fraction", `"2026-01-02T03:04:05Z"`, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), false},
		{"garbage", `"yesterday"`, time.Time{}, true},
		{"number", `12`, time.Time{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got Time
			err := json.Unmarshal([]byte(tc.in), &got)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error = %v, want error: %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if !time.Time(got).Equal(tc.want) || time.Time(got).Location() != time.UTC {
				t.Errorf("got %v, want %v in UTC", time.Time(got), tc.want)
			}
		})
	}
}

// TestTimeUnmarshalNull: like time.Time and ID, a JSON null leaves the value unchanged (the encoding/json convention).
func TestTimeUnmarshalNull(t *testing.T) {
	want := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	v := struct {
		T Time `json:"t"`
	}{T: Time(want)}
	if err := json.Unmarshal([]byte(`{"t":null}`), &v); err != nil {
		t.Fatalf("Unmarshal null: %v", err)
	}
	if !time.Time(v.T).Equal(want) {
		t.Errorf("null changed the time to %v", time.Time(v.T))
	}
}

func TestTimeRoundTrip(t *testing.T) {
	in := Time(time.Date(2026, 3, 4, 5, 6, 7, 890_000_000, time.UTC))
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out Time
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if !time.Time(out).Equal(time.Time(in)) {
		t.Errorf("round trip: got %v, want %v", time.Time(out), time.Time(in))
	}
}

func TestMillis(t *testing.T) {
	in := time.Date(2026, 1, 2, 12, 4, 5, 6_789_000, time.FixedZone("KST", 9*60*60))
	got := Millis(in)
	want := time.Date(2026, 1, 2, 3, 4, 5, 6_000_000, time.UTC)
	if !got.Equal(want) || got.Location() != time.UTC {
		t.Errorf("Millis(%v) = %v, want %v", in, got, want)
	}
	// Millis drops the monotonic reading, so == comparisons and cmp work on its results.
	now := Millis(time.Now())
	if now != now.Round(0) {
		t.Errorf("Millis kept a monotonic clock reading: %v", now)
	}
}

func FuzzIDUnmarshal(f *testing.F) {
	for _, s := range []string{`"1"`, `1`, `0`, `null`, `"-1"`, `-1`, `1.5`, `"9223372036854775807"`, `9223372036854775808`,
		`"abc"`, `""`, `"`, `{}`, `"\u0031"`, ` 1`, `1e2`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// Directly, as a custom unmarshaler is called.
		var direct ID
		if err := direct.UnmarshalJSON(b); err == nil && direct < 0 {
			t.Fatalf("UnmarshalJSON(%q) accepted a negative id %d", b, direct)
		}
		// Through encoding/json, as services use it.
		var id ID
		if err := json.Unmarshal(b, &id); err != nil {
			return
		}
		if id < 0 {
			t.Fatalf("Unmarshal(%q) accepted a negative id %d", b, id)
		}
		out, err := json.Marshal(id)
		if err != nil {
			t.Fatalf("Marshal(%d): %v", id, err)
		}
		var back ID
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("Unmarshal(%s) of a marshaled id: %v", out, err)
		}
		if back != id {
			t.Fatalf("round trip of %q: %d -> %s -> %d", b, id, out, back)
		}
		if want := strconv.Quote(strconv.FormatInt(int64(id), 10)); string(out) != want {
			t.Fatalf("Marshal(%d) = %s, want %s", id, out, want)
		}
	})
}
