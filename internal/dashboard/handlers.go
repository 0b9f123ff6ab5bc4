package dashboard

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	jujuerrors "github.com/juju/errors"

	"github.com/provisiond/provisiond/state"
)

//go:embed assets
var assetFS embed.FS

var templates = template.Must(template.ParseFS(assetFS, "assets/*.html"))

// contentSecurityPolicy allows the page's own scripts, styles, images
// and stream and nothing else: no inline script or style, no other
// origin, no framing, no plugins; the DOM is built with text nodes only
// (Trusted Types required, so an HTML string can never be parsed into it).
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; " +
	"require-trusted-types-for 'script'; trusted-types 'none'"

// securityHeaders are sent with every dashboard response.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
		if h.Get("Cache-Control") == "" {
			h.Set("Cache-Control", "no-store")
		}
		next.ServeHTTP(w, r)
	})
}

func (d *Dashboard) routes() {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+Prefix+"{$}", d.index)
	mux.HandleFunc("GET "+Prefix+"login", d.loginPage)
	mux.HandleFunc("POST "+Prefix+"login", d.login)
	mux.HandleFunc("POST "+Prefix+"logout", d.logout)
	mux.HandleFunc("GET "+Prefix+"events", d.events)
	mux.HandleFunc("GET "+Prefix+"history", d.entityHistory)
	mux.HandleFunc("GET "+Prefix+"static/{file}", d.static)
	mux.HandleFunc(Prefix, func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "not found", http.StatusNotFound)
	})
	d.mux = mux
}

// Handler serves everything under Prefix.
func (d *Dashboard) Handler() http.Handler { return securityHeaders(d.mux) }

// static serves the embedded assets; app.js only with a session (it is
// the page), the style sheet and the icon to anyone (the login form uses
// them).
var publicAssets = map[string]bool{"app.css": true, "icon.svg": true}

type asset struct {
	data  []byte
	etag  string
	ctype string
}

var assets = func() map[string]asset {
	out := map[string]asset{}
	types := map[string]string{".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8",
		".svg": "image/svg+xml"}
	entries, err := fs.ReadDir(assetFS, "assets")
	if err != nil {
		panic(err)
	}
	for _, e := range entries {
		ct, ok := types[path.Ext(e.Name())]
		if !ok {
			continue // the templates
		}
		b, err := assetFS.ReadFile("assets/" + e.Name())
		if err != nil {
			panic(err)
		}
		sum := sha256.Sum256(b)
		out[e.Name()] = asset{data: b, etag: `"` + hex.EncodeToString(sum[:8]) + `"`, ctype: ct}
	}
	return out
}()

func (d *Dashboard) static(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	a, ok := assets[name]
	if !ok {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	if !publicAssets[name] {
		if _, ok := d.sessions.fromRequest(r); !ok {
			http.Error(w, "no session", http.StatusUnauthorized)
			return
		}
	}
	h := w.Header()
	h.Set("Content-Type", a.ctype)
	h.Set("ETag", a.etag)
	h.Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(a.data))
}

func render(w http.ResponseWriter, status int, name string, data any) {
	var buf bytes.Buffer
	if err := templates.ExecuteTemplate(&buf, name, data); err != nil {
		http.Error(w, "cannot render the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// index is the page itself; without a session, the login form.
func (d *Dashboard) index(w http.ResponseWriter, r *http.Request) {
	sess, ok := d.sessions.fromRequest(r)
	if !ok {
		http.Redirect(w, r, Prefix+"login", http.StatusSeeOther)
		return
	}
	render(w, http.StatusOK, "index.html", map[string]any{
		"User": sess.user.Name, "CSRF": sess.csrf, "Superuser": sess.user.Access == state.AccessSuperuser,
	})
}

// Notices the login page shows after ?ended=REASON (never the query's
// own text).
var endedNotices = map[string]string{
	"logout":      "You have logged out.",
	"expired":     "Your session expired; log in again.",
	"credentials": "Your password changed; log in again.",
	"replaced":    "You logged in elsewhere; this session ended.",
	"shutdown":    "The daemon restarted; log in again.",
}

type loginData struct {
	CSRF, User, Error, Notice string
}

// loginPage serves the form. Its token is also set as a cookie: the
// POST must carry both, equal (a cross-site form cannot read the cookie
// to copy it, nor set a __Host- cookie).
func (d *Dashboard) loginPage(w http.ResponseWriter, r *http.Request) {
	if _, ok := d.sessions.fromRequest(r); ok {
		http.Redirect(w, r, Prefix, http.StatusSeeOther)
		return
	}
	d.renderLogin(w, r, http.StatusOK, loginData{Notice: endedNotices[r.URL.Query().Get("ended")]})
}

func (d *Dashboard) renderLogin(w http.ResponseWriter, r *http.Request, status int, data loginData) {
	token := ""
	if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) == 43 {
		token = c.Value
	} else {
		token = randomToken()
	}
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: token, Path: "/", MaxAge: 3600,
		Secure: true, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	data.CSRF = token
	render(w, status, "login.html", data)
}

// maxFormBytes bounds a login or logout form.
const maxFormBytes = 8 << 10

// agentPrefixes are the tag kinds of agents: such names are refused at
// the form (a user whose name starts so logs in as user-NAME).
var agentPrefixes = []string{"machine-", "unit-", "application-", "controller-"}

// userKey is the user name the state checks a login name as ("user-x"
// and "x@local" are "x").
func userKey(name string) string {
	name = strings.TrimPrefix(name, "user-")
	return strings.TrimSuffix(name, "@local")
}

func (d *Dashboard) login(w http.ResponseWriter, r *http.Request) {
	if err := d.csrf.Check(r); err != nil {
		http.Error(w, "cross-origin login refused", http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	name := strings.TrimSpace(r.PostForm.Get("user"))
	password := r.PostForm.Get("password")
	data := loginData{User: name}
	c, err := r.Cookie(csrfCookie)
	if err != nil || !tokensEqual(c.Value, r.PostForm.Get("csrf")) {
		data.Error = "The login form had expired; try again."
		d.renderLogin(w, r, http.StatusForbidden, data)
		return
	}
	if name == "" || password == "" {
		data.Error = "Enter a user name and a password."
		d.renderLogin(w, r, http.StatusUnauthorized, data)
		return
	}
	for _, p := range agentPrefixes {
		if strings.HasPrefix(name, p) {
			d.log.Info("dashboard login refused: an agent's name", "name", truncate(name), "remote", r.RemoteAddr)
			data.Error = "Agents cannot log in to the dashboard; log in as a user."
			d.renderLogin(w, r, http.StatusForbidden, data)
			return
		}
	}
	key := userKey(name)
	var attempt LoginAttempt = noAttempt{}
	if t := d.cfg.Throttle; t != nil {
		var wait time.Duration
		if attempt, wait = t.Begin(key, r.RemoteAddr); wait > 0 {
			secs := int((wait + time.Second - 1) / time.Second)
			w.Header().Set("Retry-After", strconv.Itoa(secs))
			data.Error = "Too many failed logins; try again in " + strconv.Itoa(secs) + " s."
			d.renderLogin(w, r, http.StatusTooManyRequests, data)
			return
		}
	}
	gen := d.sessions.generation(key)
	u, err := d.cfg.State.CheckUserPassword(r.Context(), name, password)
	if err != nil {
		if !errors.Is(err, state.ErrBadCredentials) && !jujuerrors.Is(err, jujuerrors.Unauthorized) {
			attempt.Abandon()
			d.log.Error("dashboard login: checking the password failed", "err", err)
			data.Error = "The login could not be checked (see the daemon's log)."
			d.renderLogin(w, r, http.StatusInternalServerError, data)
			return
		}
		attempt.Failed()
		d.log.Info("dashboard login refused", "user", truncate(name), "remote", r.RemoteAddr)
		data.Error = "Invalid user name or password."
		d.renderLogin(w, r, http.StatusUnauthorized, data)
		return
	}
	attempt.Succeeded()
	sess, token, err := d.sessions.add(u, r.RemoteAddr, gen)
	switch {
	case errors.Is(err, errTooManySessions):
		data.Error = "Too many dashboard sessions are open; try again later."
		d.renderLogin(w, r, http.StatusServiceUnavailable, data)
		return
	case err != nil:
		data.Error = "Your password changed during the login; try again."
		d.renderLogin(w, r, http.StatusConflict, data)
		return
	}
	d.log.Info("dashboard login", "user", u.Name, "remote", r.RemoteAddr)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: token, Path: "/",
		MaxAge: int(sess.expires.Sub(sess.created) / time.Second), Secure: true, HttpOnly: true,
		SameSite: http.SameSiteStrictMode})
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: "", Path: "/", MaxAge: -1,
		Secure: true, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, Prefix, http.StatusSeeOther)
}

// logout ends the session: its streams say "logout" and end.
func (d *Dashboard) logout(w http.ResponseWriter, r *http.Request) {
	if err := d.csrf.Check(r); err != nil {
		http.Error(w, "cross-origin logout refused", http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	sess, ok := d.sessions.fromRequest(r)
	if !ok {
		http.Redirect(w, r, Prefix+"login", http.StatusSeeOther)
		return
	}
	if !tokensEqual(sess.csrf, r.PostForm.Get("csrf")) {
		http.Error(w, "logout needs the page's token", http.StatusForbidden)
		return
	}
	d.sessions.end(sess, reasonLogout)
	d.log.Info("dashboard logout", "user", sess.user.Name, "remote", r.RemoteAddr)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1,
		Secure: true, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, Prefix+"login?ended=logout", http.StatusSeeOther)
}

// truncate bounds a name that goes to the log.
func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// noAttempt is the LoginAttempt of a dashboard without a Throttle.
type noAttempt struct{}

func (noAttempt) Failed()    {}
func (noAttempt) Succeeded() {}
func (noAttempt) Abandon()   {}
