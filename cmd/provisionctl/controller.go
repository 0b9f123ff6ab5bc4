package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/provisiond/provisiond/internal/buildinfo"
	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/size"
)

// Verbs about the controller itself: version, show-controller.
func (a *app) addControllerCommands(root *cobra.Command) {
	root.AddCommand(a.versionCommand(), a.showControllerCommand(), a.historyCommand())
}

// buildDoc is a build of provisiond or provisionctl.
type buildDoc struct {
	Version   string `json:"version"`
	Revision  string `json:"revision"`
	GoVersion string `json:"go-version"`
}

// serverBuildDoc is the daemon's build, the Juju API level it serves and
// where it was reached.
type serverBuildDoc struct {
	buildDoc
	APIVersion string `json:"api-version"`
	Address    string `json:"address"`
}

type versionDoc struct {
	Client buildDoc `json:"client"`
	// Server is null when the daemon was not asked or could not be
	// reached.
	Server *serverBuildDoc `json:"server"`
}

func (a *app) versionCommand() *cobra.Command {
	var (
		format     formatFlag
		clientOnly bool
	)
	cmd := &cobra.Command{
		Use:     "version [--client]",
		GroupID: "observe",
		Short:   "Print the versions of provisionctl and of the daemon",
		Long: `Print provisionctl's version and, from the daemon, provisiond's and the Juju
API level it serves (as etcdctl version prints client and server). With
--client it does not contact the daemon. When the daemon cannot be reached
the client's version is still printed and the exit status is 1.

json and yaml: {"client": {version, revision, go-version}, "server":
{version, revision, go-version, api-version, address} or null}.`,
		Example: `  provisionctl version
  provisionctl version --client
  provisionctl version --format json | jq -r .server.version`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			bi := buildinfo.Get()
			doc := versionDoc{Client: buildDoc{bi.Version, bi.Revision, bi.GoVersion}}
			var serr error
			if !clientOnly {
				var info params.ControllerInfo
				if serr = a.call(cmd.Context(), "ControllerInfo", nil, &info); serr == nil {
					doc.Server = &serverBuildDoc{buildDoc: buildDoc{info.Version, info.Revision, info.GoVersion},
						APIVersion: info.APIVersion, Address: a.addr}
				}
			}
			err := write(a.stdout, format, doc, func(w io.Writer) error {
				fmt.Fprintf(w, "client: provisionctl %s\n", bi)
				if doc.Server != nil {
					s := doc.Server
					fmt.Fprintf(w, "server: provisiond %s, Juju API %s, at %s\n",
						buildinfo.Info{Version: s.Version, Revision: s.Revision, GoVersion: s.GoVersion}, s.APIVersion, s.Address)
				}
				return nil
			})
			if err != nil {
				return err
			}
			if serr != nil {
				return fmt.Errorf("server: %w", serr)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "print only provisionctl's version")
	addFormatFlag(cmd, &format)
	return cmd
}

// controllerDoc is what show-controller prints.
type controllerDoc struct {
	params.ControllerInfo // its keys first, as the daemon sends them
	// Health is the answer of GET /health at each API address: "ok" or
	// what went wrong.
	Health      map[string]string `json:"health"`
	User        string            `json:"user"`
	Credentials string            `json:"credentials"`
}

func (a *app) showControllerCommand() *cobra.Command {
	var format formatFlag
	cmd := &cobra.Command{
		Use:     "show-controller",
		GroupID: "observe",
		Short:   "Show the controller: UUIDs, addresses, version, store, health",
		Long: `Show the controller provisionctl talks to: its UUID and the controller
model's, the API addresses it reports to agents, the provisiond build and
Juju API level, how many models it holds, its store (engine, bbolt's
schema version, revision, size and, on etcd, its space quota, how far
its history is compacted and each member as the daemon last heard from
it) and the health of each of its API addresses (GET /health over TLS,
verified against the CA of credentials.yaml), with the user and
credentials file used.`,
		Example: `  provisionctl show-controller
  provisionctl show-controller --format json | jq .health`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var info params.ControllerInfo
			if err := a.call(cmd.Context(), "ControllerInfo", nil, &info); err != nil {
				return err
			}
			doc := controllerDoc{ControllerInfo: info, Health: map[string]string{}, User: a.creds.AdminUser,
				Credentials: a.credentialsPath()}
			if doc.User == "" {
				doc.User = "admin"
			}
			for _, addr := range info.APIAddresses {
				doc.Health[addr] = a.health(cmd.Context(), addr)
			}
			return write(a.stdout, format, doc, func(w io.Writer) error {
				t := table{header: []string{"KEY", "VALUE"}}
				t.add("controller-uuid", doc.ControllerUUID)
				t.add("controller-model-uuid", doc.ControllerModelUUID)
				t.add("api-addresses", strings.Join(doc.APIAddresses, ","))
				t.add("version", buildinfo.Info{Version: doc.Version, Revision: doc.Revision, GoVersion: doc.GoVersion}.String())
				t.add("api-version", doc.APIVersion)
				t.add("models", strconv.Itoa(doc.Models))
				t.add("store", storeLine(doc.Store))
				if h := doc.History; h != nil {
					t.add("history", historyLine(*h))
				}
				for _, m := range doc.Store.Members {
					t.add("store member "+m.Endpoint, memberLine(m))
				}
				for _, addr := range doc.APIAddresses {
					t.add("health "+addr, doc.Health[addr])
				}
				t.add("user", doc.User)
				t.add("credentials", doc.Credentials)
				return t.write(w)
			})
		},
	}
	addFormatFlag(cmd, &format)
	return cmd
}

// storeLine is show-controller's line of the store: its engine, layout
// version (bbolt's), revision, size (of its quota, on etcd), how far its
// history is compacted, and how many of its members answer.
func storeLine(s params.StoreInfo) string {
	parts := []string{s.Engine}
	if s.SchemaVersion != 0 {
		parts = append(parts, fmt.Sprintf("schema %d", s.SchemaVersion))
	}
	parts = append(parts, fmt.Sprintf("revision %d", s.Revision))
	size := sizeOfBytes(s.SizeBytes)
	if s.QuotaBytes > 0 {
		size += " of " + sizeOfBytes(s.QuotaBytes) + " quota"
	}
	parts = append(parts, size)
	if s.CompactRevision != 0 {
		parts = append(parts, fmt.Sprintf("compacted to %d", s.CompactRevision))
	}
	if len(s.Members) > 0 {
		up := 0
		for _, m := range s.Members {
			if m.Up {
				up++
			}
		}
		parts = append(parts, fmt.Sprintf("%d of %d members up", up, len(s.Members)))
	}
	return strings.Join(parts, ", ")
}

// historyLine is show-controller's line of the history of commits: its
// retention, the oldest revision kept and since when, and its size where
// the engine counts it.
func historyLine(h params.HistoryInfo) string {
	parts := []string{"retention " + h.Retention}
	if h.OldestRevision == 0 {
		parts = append(parts, "none kept yet")
	} else {
		parts = append(parts, fmt.Sprintf("from revision %d (%s)", h.OldestRevision, h.OldestTime))
	}
	if h.Records > 0 {
		parts = append(parts, fmt.Sprintf("%d records, %s", h.Records, sizeOfBytes(h.SizeBytes)))
	}
	return strings.Join(parts, ", ")
}

// memberLine is show-controller's line of one etcd member.
func memberLine(m params.StoreMember) string {
	if !m.Up {
		if m.Error == "" {
			return "down"
		}
		return "down: " + m.Error
	}
	line := "up, " + sizeOfBytes(m.SizeBytes)
	if len(m.Alarms) > 0 {
		line += ", alarms " + strings.Join(m.Alarms, ",")
	}
	return line
}

// sizeOfBytes shows a byte count in the unit of sizes (MiB, rounded up),
// or in KiB below one MiB.
func sizeOfBytes(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%d KiB", (n+1023)>>10)
	}
	return size.FormatMiB(uint64((n + 1<<20 - 1) >> 20))
}

// health asks GET /health of one API address, verifying the daemon as
// agents do (CA of credentials.yaml, name juju-apiserver).
func (a *app) health(ctx context.Context, addr string) string {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(a.creds.CACert)) {
		return "no CA certificate in the credentials file"
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "juju-apiserver", MinVersion: tls.VersionTLS12},
	}}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/health", nil)
	if err != nil {
		return err.Error()
	}
	resp, err := hc.Do(req)
	if err != nil {
		return dialCause(err).Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("HTTP %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return strings.TrimSpace(string(body))
}
