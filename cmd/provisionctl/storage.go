package main

import (
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/provisiond/provisiond/rpc/params"
)

// Verbs about storage pools: create-storage-pool, storage-pools,
// remove-storage-pool.
func (a *app) addStorageCommands(root *cobra.Command) {
	root.AddCommand(a.createStoragePoolCommand(), a.storagePoolsCommand(), a.removeStoragePoolCommand())
}

// poolAttrs formats attributes as KEY=VALUE, sorted.
func poolAttrs(attrs map[string]any) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(attrs)) {
		out = append(out, k+"="+formatValue(attrs[k]))
	}
	return strings.Join(out, " ")
}

func (a *app) createStoragePoolCommand() *cobra.Command {
	var (
		format formatFlag
		model  string
	)
	cmd := &cobra.Command{
		Use:     "create-storage-pool NAME PROVIDER [KEY=VALUE...]",
		GroupID: "storage",
		Short:   "Create a storage pool",
		Long: `Create a storage pool in a model: a NAME (Juju's rule: a letter, then
letters, digits and '-'), a PROVIDER of the model's type (caas: kubernetes,
loop, rootfs, tmpfs; iaas: loop, rootfs, tmpfs) and the provider's
attributes, for example storage-class, storage-provisioner and
storage-mode for kubernetes. Deploy's --storage and add-machine's --disks
name pools.

` + valueTyping + `

It prints a message, or with --format json or yaml what changed
(added.storage-pools) with the pool as result.`,
		Example: `  provisionctl create-storage-pool fast kubernetes storage-class=ssd -m k8s
  provisionctl create-storage-pool scratch tmpfs -m k8s
  provisionctl create-storage-pool disks loop --format json`,
		Args: minArgs(2, "NAME PROVIDER"),
		RunE: func(cmd *cobra.Command, pos []string) error {
			attrs, err := parseKVs(pos[2:])
			if err != nil {
				return err
			}
			args := params.CreateStoragePoolArgs{Model: model, Name: pos[0], Provider: pos[1]}
			if len(attrs) > 0 {
				args.Attrs = attrs
			}
			var res params.StoragePoolInfo
			if err := a.call(cmd.Context(), "CreateStoragePool", args, &res); err != nil {
				return err
			}
			return a.writeMutation(cmd.Context(), format, model, newMutation().added("storage-pools", res.Name).result(res), func() {
				a.infof("Created storage pool %q (%s).", res.Name, res.Provider)
			})
		},
	}
	a.addModelFlag(cmd, &model)
	addFormatFlag(cmd, &format)
	return cmd
}

func (a *app) storagePoolsCommand() *cobra.Command {
	var (
		format formatFlag
		model  string
	)
	cmd := &cobra.Command{
		Use:     "storage-pools",
		GroupID: "storage",
		Short:   "List a model's storage pools",
		Long: `List the storage pools of a model by name: provider and attributes.
Provider types (loop, tmpfs, ...) may be named as pools without creating
one; they are not listed.`,
		Example: `  provisionctl storage-pools -m k8s
  provisionctl storage-pools --format json`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var res params.StoragePoolsResult
			if err := a.call(cmd.Context(), "StoragePools", params.ModelArgs{Model: model}, &res); err != nil {
				return err
			}
			return write(a.stdout, format, res, func(w io.Writer) error {
				if len(res.Pools) == 0 {
					a.infof("No storage pools.")
					return nil
				}
				t := table{header: []string{"NAME", "PROVIDER", "ATTRIBUTES"}, cutLast: true}
				for _, p := range res.Pools {
					t.add(p.Name, p.Provider, poolAttrs(p.Attrs))
				}
				return t.write(w)
			})
		},
	}
	a.addModelFlag(cmd, &model)
	addFormatFlag(cmd, &format)
	return cmd
}

func (a *app) removeStoragePoolCommand() *cobra.Command {
	var (
		format formatFlag
		model  string
	)
	cmd := &cobra.Command{
		Use:     "remove-storage-pool NAME",
		GroupID: "storage",
		Short:   "Remove a storage pool",
		Long: `Remove a storage pool. A pool that an application's storage, a
filesystem or a volume still names is kept ("in use").

It prints a message, or with --format json or yaml what changed
(removed.storage-pools) with the removed pool as result.`,
		Example: `  provisionctl remove-storage-pool scratch -m k8s
  provisionctl remove-storage-pool disks --format json`,
		Args:              exactArgs("NAME"),
		ValidArgsFunction: firstArg(a.completer(a.poolNames)),
		RunE: func(cmd *cobra.Command, pos []string) error {
			var res params.StoragePoolInfo
			if err := a.call(cmd.Context(), "RemoveStoragePool", params.RemoveStoragePoolArgs{Model: model, Name: pos[0]}, &res); err != nil {
				return err
			}
			return a.writeMutation(cmd.Context(), format, model, newMutation().removed("storage-pools", res.Name).result(res), func() {
				a.infof("Removed storage pool %q.", res.Name)
			})
		},
	}
	a.addModelFlag(cmd, &model)
	addFormatFlag(cmd, &format)
	return cmd
}
