package paysim

import (
	"errors"
	"html/template"
	"net/http"
	"net/url"
)

// The payer's pages: the links paysim hands out as PayPal's payer-action/approve link,
// KukoPay's next_action.redirect_url and a generic job's action.url. GET shows the
// payment and two buttons; POST decision=approve approves it (as Approve does) and
// sends the payer to the return URL, decision=cancel sends them to the cancel URL and
// changes nothing, as at the real providers. They are for a person trying the dev
// environment; tests use Approve or the control API.

var hostedTemplate = template.Must(template.New("hosted").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>paysim {{.Provider}} checkout</title></head>
<body>
<h1>paysim {{.Provider}} checkout</h1>
<p>Payment <code>{{.ID}}</code> ({{.Reference}}): {{.Amount}} {{.Currency}}, {{.State}}.</p>
{{if .Waiting}}<form method="post">
<button name="decision" value="approve">Approve</button>
<button name="decision" value="cancel">Cancel</button>
</form>{{else}}<p>Nothing to do here any more.</p>{{end}}
</body></html>
`))

func (s *Sim) hostedPage(provider string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		if provider == PayPal {
			id = r.URL.Query().Get("token")
		}
		s.mu.Lock()
		p, ok := s.payments[provider][id]
		var view struct {
			Provider, ID, Reference, Currency, State string
			Amount                                   int64
			Waiting                                  bool
		}
		var returnURL, cancelURL string
		if ok {
			s.refreshLocked(p)
			view.Provider, view.ID, view.Reference, view.Currency, view.State = provider, p.id, p.ref, p.currency, string(p.state)
			view.Amount, view.Waiting = p.amount, p.state == stPending
			returnURL, cancelURL = p.returnURL, p.cancelURL
		}
		s.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_ = hostedTemplate.Execute(w, view)
		case http.MethodPost:
			back := cancelURL
			if r.FormValue("decision") == "approve" {
				if err := s.Approve(provider, id); err != nil {
					code := http.StatusInternalServerError
					if errors.Is(err, errNotAwaitingPayer) {
						code = http.StatusConflict
					}
					http.Error(w, err.Error(), code)
					return
				}
				back = returnURL
			}
			if back == "" {
				_, _ = w.Write([]byte(r.FormValue("decision") + "\n"))
				return
			}
			u, err := url.Parse(back)
			if err != nil {
				http.Error(w, "invalid return URL", http.StatusBadGateway)
				return
			}
			// What the providers append, so a return page can tell which payment.
			q := u.Query()
			if provider == PayPal {
				q.Set("token", id)
			} else {
				q.Set("payment", id)
			}
			u.RawQuery = q.Encode()
			http.Redirect(w, r, u.String(), http.StatusSeeOther)
		default:
			w.Header().Set("Allow", "GET, HEAD, POST")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		}
	}
}
