package apijson

import (
	"strings"
	"time"
)

// TimeLayout is RFC 3339 with exactly three fractional digits.
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

// Time is a time.Time written as RFC 3339 in UTC with milliseconds.
type Time time.Time

func (t Time) MarshalJSON() ([]byte, error) {
	return []byte(`"` + time.Time(t).UTC().Format(TimeLayout) + `"`), nil
}

func (t *Time) UnmarshalJSON(b []byte) error {
	if string(b) == "null" { // the encoding/json convention (and time.Time's): null leaves the value as it is
		return nil
	}
	v, err := time.Parse(time.RFC3339Nano, strings.Trim(string(b), `"`))
	if err != nil {
		return err
	}
	*t = Time(v.UTC())
	return nil
}

// Millis truncates t to the milliseconds every store keeps, in UTC.
func Millis(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }
