// Package wire holds the JSON conventions every service and event shares (SPEC §2): 64-bit ids written as strings,
// because JavaScript numbers lose precision above 2^53, and read from either a string or a number; times in RFC 3339
// UTC with milliseconds.
package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// ID is an int64 that is written to JSON as a string.
type ID int64

func (id ID) MarshalJSON() ([]byte, error) {
	return strconv.AppendQuote(nil, strconv.FormatInt(int64(id), 10)), nil
}

func (id *ID) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, []byte("null")) {
		return nil
	}
	s := string(b)
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
	}
	v, err := Parse(s)
	if err != nil {
		return err
	}
	*id = ID(v)
	return nil
}

func (id ID) String() string { return strconv.FormatInt(int64(id), 10) }

// Parse reads a decimal int64 id; ids are never negative.
func Parse(s string) (int64, error) {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%q is not a valid id (a non-negative 64-bit integer)", s)
	}
	return v, nil
}
