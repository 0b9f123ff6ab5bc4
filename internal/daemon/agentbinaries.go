package daemon

import (
	"io"
	"net/http"
	"path/filepath"
	"time"

	"github.com/provisiond/provisiond/internal/agentbinaries"
)

// AgentBinariesDir is the agent binaries' blob store's directory in the
// data dir (internal/agentbinaries serves them).
const AgentBinariesDir = agentbinaries.DirName

// serveAgentBinaries opens the agent binaries' blob store under the data
// dir and adds their routes to mux (internal/agentbinaries).
func (d *Daemon) serveAgentBinaries(mux *http.ServeMux) error {
	a, err := agentbinaries.New(mux, agentbinaries.Config{
		Dir:         filepath.Join(d.cfg.DataDir, AgentBinariesDir),
		State:       d.state,
		Hub:         d.hub,
		Logger:      d.log,
		MaxSize:     d.cfg.MaxAgentBinarySize,
		Shared:      d.cfg.shared(),
		ServerID:    d.serverID,
		CACertPEM:   d.tls.CACertPEM,
		Superuser:   d.superuser,
		Writer:      d.movingWriter,
		ReadTimeout: httpReadTimeout,
	})
	if err != nil {
		return err
	}
	d.binaries = a
	return nil
}

// DataDir is the daemon's data dir.
func (d *Daemon) DataDir() string { return d.cfg.DataDir }

// movingWriter is w, whose write deadline moves out by --write-timeout
// before each write: transfers of agent binaries and backups take longer
// than the HTTP server's whole-request deadlines allow on a slow link;
// they only have to keep moving, so a transfer fails only when it stalls
// for that long.
func (d *Daemon) movingWriter(w http.ResponseWriter) io.Writer {
	rc := http.NewResponseController(w)
	timeout := d.cfg.WriteTimeout
	return writerFunc(func(p []byte) (int, error) {
		if timeout > 0 {
			_ = rc.SetWriteDeadline(time.Now().Add(timeout))
		}
		return w.Write(p)
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
