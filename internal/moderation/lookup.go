package moderation

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"board/internal/apijson"
	"board/internal/fault"
)

// found is a target as its service describes it.
type found struct {
	typ                              TargetType
	id, articleID, boardID, writerID int64
	excerpt                          string
}

// lookUp finds a target at its service.
func (s *Service) lookUp(ctx context.Context, typ TargetType, id int64) (found, error) {
	if typ == Article {
		return s.lookUpArticle(ctx, id)
	}
	return s.lookUpComment(ctx, id)
}

func (s *Service) lookUpArticle(ctx context.Context, id int64) (found, error) {
	var a struct {
		Title    string     `json:"title"`
		BoardID  apijson.ID `json:"boardId"`
		WriterID apijson.ID `json:"writerId"`
	}
	ok, err := s.get(ctx, "article", s.cfg.Origins.Article, "/v1/articles/"+strconv.FormatInt(id, 10), &a)
	if err != nil {
		return found{}, err
	}
	if !ok {
		return found{}, targetNotFound(Article, id)
	}
	return found{typ: Article, id: id, articleID: id, boardID: int64(a.BoardID), writerID: int64(a.WriterID), excerpt: excerpt(a.Title)}, nil
}

// lookUpComment finds a comment of either version (they live in tables of their own, each version's GET finding only
// its own), then its article for the board.
func (s *Service) lookUpComment(ctx context.Context, id int64) (found, error) {
	var c struct {
		Content   string     `json:"contentText"` // the plain text: the queue shows no markup
		ArticleID apijson.ID `json:"articleId"`
		WriterID  apijson.ID `json:"writerId"`
		Deleted   bool       `json:"deleted"`
	}
	ok := false
	for _, version := range []string{"/v2", "/v1"} {
		var err error
		if ok, err = s.get(ctx, "comment", s.cfg.Origins.Comment, version+"/comments/"+strconv.FormatInt(id, 10), &c); err != nil {
			return found{}, err
		}
		if ok {
			break
		}
	}
	if !ok || c.Deleted {
		return found{}, targetNotFound(Comment, id)
	}
	a, err := s.lookUpArticle(ctx, int64(c.ArticleID))
	if fault.KindOf(err) == fault.NotFound {
		return found{}, targetNotFound(Comment, id) // its article is deleted: the comment goes with it
	} else if err != nil {
		return found{}, err
	}
	return found{typ: Comment, id: id, articleID: a.id, boardID: a.boardID, writerID: int64(c.WriterID), excerpt: excerpt(c.Content)}, nil
}

// userRole returns the role of a user at the user service: USER_NOT_FOUND when there is no such user.
func (s *Service) userRole(ctx context.Context, id int64) (string, error) {
	var u struct {
		Role string `json:"role"`
	}
	ok, err := s.get(ctx, "user", s.cfg.Origins.User, "/v1/users/"+strconv.FormatInt(id, 10), &u)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fault.NotFoundf("USER_NOT_FOUND", "user %d does not exist", id)
	}
	return u.Role, nil
}

// get GETs path at a service's origin into v, within the lookup deadline: false on a 404, a 503 fault when the
// service cannot answer.
func (s *Service) get(ctx context.Context, service, origin, path string, v any) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.LookupTimeout)
	defer cancel()
	unavailable := func(err error) error {
		return fault.Unavailablef(err, strings.ToUpper(service)+"_SERVICE_UNAVAILABLE", "the %s service did not answer; try again", service)
	}
	url := strings.TrimSuffix(origin, "/") + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return false, unavailable(err)
	}
	defer resp.Body.Close()
	body := io.LimitReader(resp.Body, 1<<20)
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		_, _ = io.Copy(io.Discard, body) // lets the connection be reused
		return false, nil
	default:
		_, _ = io.Copy(io.Discard, body)
		return false, unavailable(fmt.Errorf("GET %s: %s", url, resp.Status))
	}
	if err := json.NewDecoder(body).Decode(v); err != nil {
		return false, unavailable(fmt.Errorf("GET %s: %w", url, err))
	}
	return true, nil
}

// excerpt is the start of a text, as much as the queue shows.
func excerpt(text string) string {
	runes := []rune(text)
	if len(runes) <= excerptRunes {
		return text
	}
	return string(runes[:excerptRunes]) + "…"
}
