package main

import (
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/provisiond/provisiond/rpc/params"
)

// Shell completion of the names the daemon knows: machine ids,
// applications, units, storage pools, spaces, subnets, agent binaries (and
// models, in app.go). Each asks the daemon, in the model of the command
// line's -m; when the daemon cannot be reached it offers nothing. Names
// already on the command line are not offered again.

// completer returns a cobra completion function over the names list
// finds.
func (a *app) completer(list func(cmd *cobra.Command, model string) ([]string, error)) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		model, _ := cmd.Flags().GetString("model")
		names, err := list(cmd, model)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		for _, n := range names {
			if strings.HasPrefix(n, toComplete) && !slices.Contains(args, n) {
				out = append(out, n)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// firstArg limits a completion to the first argument.
func firstArg(f cobra.CompletionFunc) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return f(cmd, args, toComplete)
	}
}

func (a *app) status(cmd *cobra.Command, model string) (params.ModelStatus, error) {
	var st params.ModelStatus
	err := a.call(cmd.Context(), "Status", params.ModelArgs{Model: model}, &st)
	return st, err
}

func (a *app) machineIDs(cmd *cobra.Command, model string) ([]string, error) {
	st, err := a.status(cmd, model)
	var out []string
	for _, m := range allMachines(st.Machines) {
		out = append(out, m.ID)
	}
	return out, err
}

func (a *app) applicationNames(cmd *cobra.Command, model string) ([]string, error) {
	st, err := a.status(cmd, model)
	var out []string
	for _, ap := range st.Applications {
		out = append(out, ap.Name)
	}
	return out, err
}

func (a *app) unitNames(cmd *cobra.Command, model string) ([]string, error) {
	st, err := a.status(cmd, model)
	var out []string
	for _, ap := range st.Applications {
		for _, u := range ap.Units {
			out = append(out, u.Name)
		}
	}
	return out, err
}

func (a *app) storageIDs(cmd *cobra.Command, model string) ([]string, error) {
	st, err := a.status(cmd, model)
	var out []string
	for _, si := range st.Storage.Instances {
		out = append(out, si.ID)
	}
	return out, err
}

func (a *app) poolNames(cmd *cobra.Command, model string) ([]string, error) {
	var res params.StoragePoolsResult
	err := a.call(cmd.Context(), "StoragePools", params.ModelArgs{Model: model}, &res)
	var out []string
	for _, p := range res.Pools {
		out = append(out, p.Name)
	}
	return out, err
}

func (a *app) spaceNames(cmd *cobra.Command, model string) ([]string, error) {
	var res params.SpacesResult
	err := a.call(cmd.Context(), "Spaces", params.ModelArgs{Model: model}, &res)
	var out []string
	for _, s := range res.Spaces {
		out = append(out, s.Name)
	}
	return out, err
}

func (a *app) subnetCIDRs(cmd *cobra.Command, model string) ([]string, error) {
	var res params.SubnetsResult
	err := a.call(cmd.Context(), "Subnets", params.ModelArgs{Model: model}, &res)
	var out []string
	for _, s := range res.Subnets {
		out = append(out, s.CIDR)
	}
	return out, err
}

func (a *app) agentBinaryVersions(cmd *cobra.Command, _ string) ([]string, error) {
	var res params.AgentBinariesResult
	err := a.call(cmd.Context(), "AgentBinaries", nil, &res)
	var out []string
	for _, b := range res.AgentBinaries {
		out = append(out, b.Version)
	}
	return out, err
}

func (a *app) completeMachines(cmd *cobra.Command, args []string, s string) ([]string, cobra.ShellCompDirective) {
	return a.completer(a.machineIDs)(cmd, args, s)
}
