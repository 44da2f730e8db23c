package notification

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"board/internal/apijson"
	"board/internal/fault"
	"board/internal/markdown"
)

// mentioned returns the users a post's source mentions (at most markdown.MaxMentions): its names resolved at the
// user service within the lookup deadline. A name that is no one's is left out; the service down is an error,
// for the consumer to retry.
func (s *Service) mentioned(ctx context.Context, source string) ([]int64, error) {
	names := markdown.Mentions(source)
	if len(names) == 0 || s.cfg.UserOrigin == "" {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	u := strings.TrimSuffix(s.cfg.UserOrigin, "/") + "/v1/users?usernames=" + url.QueryEscape(strings.Join(names, ","))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	unavailable := func(err error) error {
		return fault.Unavailablef(err, "USER_SERVICE_UNAVAILABLE", "the user service did not answer; try again")
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, unavailable(err)
	}
	defer resp.Body.Close()
	body := io.LimitReader(resp.Body, 1<<20)
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, body)
		return nil, unavailable(fmt.Errorf("GET %s: %s", u, resp.Status))
	}
	var users []struct {
		UserID   apijson.ID `json:"userId"`
		Username string     `json:"username"`
	}
	if err := json.NewDecoder(body).Decode(&users); err != nil {
		return nil, unavailable(fmt.Errorf("GET %s: %w", u, err))
	}
	asked := map[string]bool{}
	for _, n := range names {
		asked[n] = true
	}
	var ids []int64
	for _, user := range users {
		if asked[strings.ToLower(user.Username)] && user.UserID > 0 {
			ids = append(ids, int64(user.UserID))
		}
	}
	return ids, nil
}
