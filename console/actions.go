package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/tipkv/tipkv"
)

// Actions are safe by default:
//
//   - Off unless the mounting code sets Options.Authorize.
//   - POST only, with a CSRF token: a signed double-submit cookie. The
//     console gives each browser a random cookie (HttpOnly,
//     SameSite=Strict) and puts HMAC-SHA256(secret, cookie) in its pages'
//     forms; an action must carry both, and the token must match the
//     cookie. Another site can make a browser send the cookie but cannot
//     read a page to learn the token. A request that says it comes from
//     another site (Sec-Fetch-Site: cross-site) is refused as well.
//   - Authorize decides, with the request (and so the service's own
//     authentication) and the Action in hand.
//   - Every action, run or refused, logs one line.

// cookieName is the CSRF cookie.
const cookieName = "tipkv-console"

// maxForm bounds an action's form body.
const maxForm = 64 << 10

// tokenFor returns the CSRF token of the request's browser, setting a new
// cookie on w when the request has none.
func (c *Console) tokenFor(w http.ResponseWriter, r *http.Request) string {
	if ck, err := r.Cookie(cookieName); err == nil && validCookie(ck.Value) {
		return c.sign(ck.Value)
	}
	b := make([]byte, 24)
	_, _ = rand.Read(b) // crypto/rand never fails on supported systems
	v := base64.RawURLEncoding.EncodeToString(b)
	path := c.opts.Prefix
	if path == "" {
		path = "/"
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: v, Path: path, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	return c.sign(v)
}

func validCookie(v string) bool {
	b, err := base64.RawURLEncoding.DecodeString(v)
	return err == nil && len(b) == 24
}

func (c *Console) sign(cookie string) string {
	m := hmac.New(sha256.New, c.secret)
	io.WriteString(m, cookie)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// checkToken reports whether r carries a token that matches its cookie.
func (c *Console) checkToken(r *http.Request, token string) bool {
	ck, err := r.Cookie(cookieName)
	if err != nil || !validCookie(ck.Value) || token == "" {
		return false
	}
	return hmac.Equal([]byte(c.sign(ck.Value)), []byte(token))
}

// token is GET /api/token, for clients that are not browsers.
func (c *Console) token(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, Token{Token: c.tokenFor(w, r)})
}

// action returns the handler of POST /api/requeue or /api/discard. Its
// form (the body, application/x-www-form-urlencoded) names the queue
// (name), the dead letters (seq, repeated), the token (or the header
// X-Console-Token) and, for an HTML form, back: a path of the console to
// redirect to (303) when the action succeeded. Without back the answer is
// an ActionResult in JSON.
func (c *Console) action(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		a := Action{Name: name}
		p, err := c.actionParams(w, r)
		a.Queue, a.Seqs = p.Name, p.Seqs
		if err == nil {
			err = c.authorize(r, p, a)
		}
		if err == nil {
			err = c.run(a)
		}
		c.logAction(r, a, err)
		if err != nil {
			if p.Back != "" && statusOf(err) != http.StatusForbidden {
				c.pageError(w, r, err)
				return
			}
			c.jsonError(w, err)
			return
		}
		if p.Back != "" {
			http.Redirect(w, r, c.opts.Prefix+p.Back, http.StatusSeeOther)
			return
		}
		writeJSON(w, http.StatusOK, ActionResult{Action: a.Name, Queue: a.Queue, Seqs: a.Seqs})
	}
}

// actionParams reads an action's form.
func (c *Console) actionParams(w http.ResponseWriter, r *http.Request) (params, error) {
	if r.URL.RawQuery != "" {
		return params{}, fmt.Errorf("%w: an action takes its parameters in the body, not the URL", tipkv.ErrInvalid)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/x-www-form-urlencoded") {
		return params{}, fmt.Errorf("%w: an action's body is a form (application/x-www-form-urlencoded), not %q", tipkv.ErrInvalid, ct)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxForm))
	if err != nil {
		return params{}, fmt.Errorf("%w: action body: %v", tipkv.ErrInvalid, err)
	}
	p, err := parseParams(string(body), pName, pSeq, pToken, pBack)
	if err != nil {
		return p, err
	}
	if err := needName(p); err != nil {
		return p, err
	}
	if len(p.Seqs) == 0 {
		return p, fmt.Errorf("%w: parameter %q is required", tipkv.ErrInvalid, pSeq)
	}
	return p, nil
}

// authorize applies the rules above, in order.
func (c *Console) authorize(r *http.Request, p params, a Action) error {
	if c.opts.Authorize == nil {
		return errReadOnly
	}
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		return fmt.Errorf("%w: a request from another site", errRefused)
	}
	token := p.Token
	if token == "" {
		token = r.Header.Get("X-Console-Token")
	}
	if !c.checkToken(r, token) {
		return errToken
	}
	if err := c.opts.Authorize(r, a); err != nil {
		return fmt.Errorf("%w: %v", errRefused, err)
	}
	return nil
}

// run does the action.
func (c *Console) run(a Action) error {
	if err := c.checkOpen(); err != nil {
		return err
	}
	q, err := c.queueHandle(a.Queue)
	if err != nil {
		return err
	}
	switch a.Name {
	case "requeue":
		return q.Requeue(c.db, a.Seqs...)
	case "discard":
		return q.Discard(c.db, a.Seqs...)
	}
	return fmt.Errorf("%w: unknown action %q", tipkv.ErrInvalid, a.Name)
}

// logAction logs one line for an action, run or refused: Info when it
// ran, Warn when it did not. A read-only console has no logger; its
// refusals are not logged (nothing can run there).
func (c *Console) logAction(r *http.Request, a Action, err error) {
	if c.log == nil {
		return
	}
	attrs := []slog.Attr{
		slog.String("event", "console-action"),
		slog.String("action", a.Name),
		slog.String("queue", a.Queue),
		slog.Any("seqs", a.Seqs),
		slog.String("remote", r.RemoteAddr),
	}
	if err != nil {
		c.log.LogAttrs(context.Background(), slog.LevelWarn, "tipkv: console action refused or failed", append(attrs, slog.String("error", err.Error()))...)
		return
	}
	c.log.LogAttrs(context.Background(), slog.LevelInfo, "tipkv: console action", attrs...)
}
