// Package apijson holds the JSON conventions every service and event shares (SPEC §2): 64-bit ids written as strings,
// because JavaScript numbers lose precision above 2^53, and read from either a string or a number; times in RFC 3339
// UTC with milliseconds.
package apijson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// IDSyntax says what an id looks like, for error messages.
const IDSyntax = "ids are non-negative 64-bit integers in decimal, without sign, spaces or leading zeros"

// ID is an int64 that is written to JSON as a string.
type ID int64

func (id ID) MarshalJSON() ([]byte, error) {
	return strconv.AppendQuote(nil, strconv.FormatInt(int64(id), 10)), nil
}

// UnmarshalJSON reads an id from a JSON string or number. A value that is not an id is reported as a
// *json.UnmarshalTypeError whose Value is the JSON text (cut to a readable length): encoding/json then fills in
// which field held it, as it does for its own type errors.
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
		return &json.UnmarshalTypeError{Value: shorten(string(b)), Type: reflect.TypeFor[ID]()}
	}
	*id = ID(v)
	return nil
}

func (id ID) String() string { return strconv.FormatInt(int64(id), 10) }

// Parse reads an id written canonically: the digits strconv.FormatInt writes for a non-negative int64, so that
// every id has exactly one spelling.
func Parse(s string) (int64, error) {
	canonical := s != "" && strings.Trim(s, "0123456789") == "" && (s[0] != '0' || s == "0")
	v, err := strconv.ParseInt(s, 10, 64)
	if !canonical || err != nil {
		return 0, fmt.Errorf("%q is not a valid id: %s", s, IDSyntax)
	}
	return v, nil
}

// shorten cuts a JSON text that is echoed in an error message to a readable length.
func shorten(s string) string {
	const max = 40
	if len(s) <= max {
		return s
	}
	return strings.ToValidUTF8(s[:max], "") + "…"
}
