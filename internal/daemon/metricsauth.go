package daemon

import (
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/provisiond/provisiond/facades/admin"
)

// Who may read /metrics (open, it told anyone who could reach the port the
// requests per method, the logins by outcome, the versions).
const (
	// MetricsAuthLocal: clients on loopback read it freely (a Prometheus
	// or an operator on the box); others present a superuser's name and
	// password (HTTP basic auth) or the bearer token of
	// --metrics-token-file.
	MetricsAuthLocal = "local"
	// MetricsAuthAlways: everyone presents credentials, loopback too.
	MetricsAuthAlways = "always"
	// MetricsAuthNone: open to anyone who can reach the port (the old
	// behaviour; for a port only a trusted network reaches).
	MetricsAuthNone = "none"
)

// metricsHandler serves h to the clients MetricsAuth lets in. Basic auth
// goes through the failed-login throttle, as do wrong tokens (by address).
func (d *Daemon) metricsHandler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch d.cfg.MetricsAuth {
		case MetricsAuthNone:
			h.ServeHTTP(w, r)
			return
		case MetricsAuthAlways:
		default:
			if isLoopback(r.RemoteAddr) {
				h.ServeHTTP(w, r)
				return
			}
		}
		if token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			attempt, wait := d.throttle.Begin(d.throttle.TokenKeys("metrics", r.RemoteAddr))
			if wait > 0 {
				http.Error(w, admin.ThrottledError(wait).Error(), http.StatusTooManyRequests)
				return
			}
			if d.metricsToken == "" || subtle.ConstantTimeCompare([]byte(token), []byte(d.metricsToken)) != 1 {
				attempt.Failed()
				w.Header().Set("WWW-Authenticate", `Bearer realm="provisiond"`)
				http.Error(w, "invalid token", http.StatusUnauthorized)
				return
			}
			attempt.Succeeded()
			h.ServeHTTP(w, r)
			return
		}
		if _, ok := d.superuser(w, r, "metrics", "metrics"); ok {
			h.ServeHTTP(w, r)
		}
	})
}

func isLoopback(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// readToken reads a bearer token file ("" : no token). The token is the
// file's first line; an empty one is refused, so a misconfigured file
// never opens /metrics to the empty token.
func readToken(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--metrics-token-file: %w", err)
	}
	token, _, _ := strings.Cut(string(b), "\n")
	token = strings.TrimSpace(token)
	if token == "" {
		return "", fmt.Errorf("--metrics-token-file %s: the file holds no token", path)
	}
	return token, nil
}
