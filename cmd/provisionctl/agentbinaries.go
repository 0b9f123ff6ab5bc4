package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/provisiond/provisiond/credentials"
	"github.com/provisiond/provisiond/internal/progress"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// Verbs about the agent binaries catalog: add-agent-binaries,
// agent-binaries, remove-agent-binaries (agentbinaries_remove.go).
func (a *app) addAgentBinariesCommands(root *cobra.Command) {
	root.AddCommand(a.addAgentBinariesCommand(), a.agentBinariesCommand(), a.removeAgentBinariesCommand())
}

func (a *app) addAgentBinariesCommand() *cobra.Command {
	var (
		format formatFlag
		args   params.AddAgentBinariesArgs
		file   string
	)
	cmd := &cobra.Command{
		Use:     "add-agent-binaries VERSION --os OS --arch ARCH (--file TGZ | --url URL --sha256 HEX --size N)",
		GroupID: "machines",
		Short:   "Add agent binaries to the controller's catalog",
		Long: `Add one entry to the controller's catalog of agent binaries, which
provisioners find with FindTools and machine agents with Tools: VERSION
(3.3.0) for an OS (ubuntu; 2015 agents use a series such as trusty) and an
architecture (amd64, arm64, ppc64el, s390x, riscv64). Agents always
download them from the controller (GET /model/<uuid>/tools/<version>, no
credentials needed).

With --file, the tarball is uploaded to the controller, which stores it
in its data dir: provisionctl reads it once for its SHA-256 (checked
against --sha256 when given), then streams it (a progress bar on a
terminal); the controller keeps it only if what arrived has that size and
SHA-256. With --url instead, the controller fetches the tarball from URL
(http or https) the first time an agent asks for it, and keeps it if it
has the SHA-256 (64 hex digits) and size given.

A version already in the catalog is refused, except the same binaries
again (an upload of what the catalog already names is accepted). With
--format json or yaml it prints what changed (added.agent-binaries) with
the entry as result (its size as size-bytes); with the table format a
message on stderr. The flags each form needs are checked before anything
is sent.`,
		Example: `  provisionctl add-agent-binaries 3.3.0 --os ubuntu --arch amd64 --file juju-3.3.0-ubuntu-amd64.tgz
  provisionctl add-agent-binaries 3.3.0 --os ubuntu --arch amd64 \
      --url https://example.com/juju-3.3.0-ubuntu-amd64.tgz \
      --sha256 "$(sha256sum juju-3.3.0-ubuntu-amd64.tgz | cut -d' ' -f1)" \
      --size "$(stat -c %s juju-3.3.0-ubuntu-amd64.tgz)"`,
		Args: exactArgs("VERSION"),
		RunE: func(cmd *cobra.Command, pos []string) error {
			args.Version = pos[0]
			var res params.AgentBinaryInfo
			if file != "" {
				if args.URL != "" || cmd.Flags().Changed("size") {
					return usageError{errors.New("--file goes without --url and --size")}
				}
				if args.OS == "" || args.Arch == "" {
					return usageError{errors.New("--file needs --os and --arch")}
				}
				t, err := a.uploadAgentBinaries(cmd.Context(), args, file)
				if err != nil {
					return err
				}
				res = params.AgentBinaryInfo{Version: t.Version, SHA256: t.SHA256, Size: t.Size, URL: t.URL}
			} else {
				if err := requireFlags(cmd, "os", "arch", "url", "sha256", "size"); err != nil {
					return usagef("%v (or --file TGZ)", err)
				}
				if err := a.call(cmd.Context(), "AddAgentBinaries", args, &res); err != nil {
					return err
				}
			}
			m := newMutation().added("agent-binaries", res.Version).result(agentBinaryDocOf(res))
			return a.writeMutation(cmd.Context(), format, "", m, func() {
				a.infof("Added agent binaries %s.", res.Version)
			})
		},
	}
	cmd.Flags().StringVar(&args.OS, "os", "", "the OS (ubuntu) or 2015 series (trusty)")
	cmd.Flags().StringVar(&args.Arch, "arch", "", "the architecture (amd64, arm64, ...)")
	cmd.Flags().StringVar(&file, "file", "", "a tarball to upload to the controller")
	cmd.Flags().StringVar(&args.URL, "url", "", "where the controller gets the binaries (http or https)")
	cmd.Flags().StringVar(&args.SHA256, "sha256", "", "SHA-256 of the binaries, 64 hex digits (with --file: checked)")
	cmd.Flags().Int64Var(&args.Size, "size", 0, "size of the binaries in bytes")
	addFormatFlag(cmd, &format)
	return cmd
}

// uploadAgentBinaries uploads file as the binaries of args' version, OS
// and architecture: one read for its SHA-256 and size, one streamed to the
// daemon (POST /tools, as the admin user of the credentials).
func (a *app) uploadAgentBinaries(ctx context.Context, args params.AddAgentBinariesArgs, file string) (params.Tools, error) {
	f, err := os.Open(file)
	if err != nil {
		return params.Tools{}, err
	}
	defer f.Close()
	h := sha256.New()
	size, err := io.Copy(h, f)
	if err != nil {
		return params.Tools{}, fmt.Errorf("reading %s: %w", file, err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if args.SHA256 != "" && !strings.EqualFold(args.SHA256, sum) {
		return params.Tools{}, fmt.Errorf("%s has sha256 %s, not %s", file, sum, args.SHA256)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return params.Tools{}, err
	}
	creds, err := a.readCredentials()
	if err != nil {
		return params.Tools{}, err
	}
	bar := progress.New(a.stderr, "upload")
	defer bar.Done()
	version := args.Version + "-" + args.OS + "-" + args.Arch
	return client.UploadAgentBinaries(ctx, creds, version, bar.Reader(f, size), size, sum)
}

// readCredentials reads the credentials file connect would use.
func (a *app) readCredentials() (*credentials.Credentials, error) {
	path := a.credentialsPath()
	creds, err := credentials.Read(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no credentials file %s: start provisiond, or pass --credentials FILE or $%s", path, EnvCredentials)
	}
	return creds, err
}

func (a *app) agentBinariesCommand() *cobra.Command {
	var format formatFlag
	cmd := &cobra.Command{
		Use:     "agent-binaries",
		GroupID: "machines",
		Short:   "List the agent binaries catalog",
		Long: `List the controller's catalog of agent binaries, sorted by version: version,
size in bytes, the start of the SHA-256 and the source URL ("(uploaded)"
for a tarball uploaded with --file). json and yaml show the whole SHA-256,
the size as size-bytes and "stored": true once the controller holds the
tarball.`,
		Example: `  provisionctl agent-binaries
  provisionctl agent-binaries --format json | jq -r '."agent-binaries"[].version'`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var res params.AgentBinariesResult
			if err := a.call(cmd.Context(), "AgentBinaries", nil, &res); err != nil {
				return err
			}
			return write(a.stdout, format, agentBinariesDocOf(res), func(w io.Writer) error {
				if len(res.AgentBinaries) == 0 {
					a.infof("No agent binaries.")
					return nil
				}
				t := table{header: []string{"VERSION", "SIZE", "SHA256", "URL"}}
				for _, b := range res.AgentBinaries {
					sum := b.SHA256
					if len(sum) > 12 {
						sum = sum[:12] + "..."
					}
					src := orDash(b.URL)
					if b.Stored && b.URL == "" {
						src = "(uploaded)"
					}
					t.add(b.Version, strconv.FormatInt(b.Size, 10), sum, src)
				}
				return t.write(w)
			})
		},
	}
	addFormatFlag(cmd, &format)
	return cmd
}
