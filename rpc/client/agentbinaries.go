package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/provisiond/provisiond/credentials"
	"github.com/provisiond/provisiond/rpc/params"
)

// UploadAgentBinaries uploads an agent binaries tarball to the daemon that
// wrote creds, as its admin user (HTTP basic auth), at POST
// /tools?binaryVersion=VERSION&sha256=HEX: body must give exactly size
// bytes whose SHA-256 is sha256 (lowercase hex), or the daemon keeps
// nothing. version is a binary version ("3.3.0-ubuntu-amd64"). It returns
// the catalog entry with the URL agents are given. A refusal is the
// daemon's error (*params.Error, with its code). The body is streamed: it
// is read once, so the first api-address that answers is the only one
// tried with it.
func UploadAgentBinaries(ctx context.Context, creds *credentials.Credentials, version string, body io.Reader,
	size int64, sha256 string) (params.Tools, error) {
	if creds == nil || len(creds.APIAddresses) == 0 {
		return params.Tools{}, errors.New("client: the credentials list no api-addresses")
	}
	if creds.AdminPassword == "" {
		return params.Tools{}, errors.New("client: the credentials have no admin-password")
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(creds.CACert)) {
		return params.Tools{}, errors.New("client: the credentials hold no usable ca-cert")
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: DefaultServerName, MinVersion: tls.VersionTLS12}}
	defer tr.CloseIdleConnections()
	user := creds.AdminUser
	if user == "" {
		user = "admin"
	}
	q := url.Values{"binaryVersion": {version}, "sha256": {sha256}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost,
		"https://"+creds.APIAddresses[0]+"/tools?"+q.Encode(), body)
	if err != nil {
		return params.Tools{}, err
	}
	req.ContentLength = size
	req.Header.Set("Content-Type", "application/x-tar-gz")
	req.SetBasicAuth("user-"+user, creds.AdminPassword)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return params.Tools{}, fmt.Errorf("client: upload agent binaries: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return params.Tools{}, fmt.Errorf("client: upload agent binaries: %w", err)
	}
	// Juju's HTTP errors carry the error object; the basic auth refusals
	// are plain text.
	var res params.ToolsResult
	if jerr := json.Unmarshal(b, &res); jerr != nil || resp.StatusCode != http.StatusOK {
		if res.Error != nil {
			return params.Tools{}, res.Error
		}
		return params.Tools{}, fmt.Errorf("client: upload agent binaries: %s: %s", resp.Status, trimBody(b))
	}
	if res.Error != nil {
		return params.Tools{}, res.Error
	}
	if len(res.Tools) != 1 {
		return params.Tools{}, fmt.Errorf("client: upload agent binaries: %d entries in the answer", len(res.Tools))
	}
	return res.Tools[0], nil
}

func trimBody(b []byte) string {
	const max = 200
	s := string(b)
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == ' ') {
		s = s[:len(s)-1]
	}
	if len(s) > max {
		s = s[:max] + "..."
	}
	return s
}
