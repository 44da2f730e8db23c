package notification

import "net/http"

// UnsubscribeLimit names the per-client-address rate limit of the unsubscribe link, which takes no access token.
const UnsubscribeLimit = "email-unsubscribe"

const unsubscribeRoute = "POST /v1/email-unsubscribe/{token}"

// OpenRoutes are the service's writes that need no access token, each with the name of its per-client-address
// rate limit: the one-click unsubscribe of a mail (RFC 8058), which the web's /unsubscribe/{token} page posts to.
var OpenRoutes = map[string]string{unsubscribeRoute: UnsubscribeLimit}

func (h handlers) unsubscribe(w http.ResponseWriter, r *http.Request) error {
	if err := h.svc.Unsubscribe(r.Context(), r.PathValue("token")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
