package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/size"
)

// Verbs about storage: storage, remove-storage, detach-storage, and the
// pools: create-storage-pool, storage-pools, remove-storage-pool.
func (a *app) addStorageCommands(root *cobra.Command) {
	root.AddCommand(a.storageCommand(), a.removeStorageCommand(), a.detachStorageCommand(),
		a.createStoragePoolCommand(), a.storagePoolsCommand(), a.removeStoragePoolCommand())
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

// Storage words: a storage instance attached to no unit is "(detached)"; a
// filesystem or volume that belongs to no storage instance and is attached
// to nothing (an iaas volume whose machine went, a filesystem of a pod the
// unit provisioner no longer reports) is "(orphaned)". Both stay in the
// model until remove-storage (detached instances) or remove-model with
// --destroy-storage or --release-storage takes them out.
const (
	detachedWord = "(detached)"
	orphanedWord = "(orphaned)"
)

// orphanedStorage lists the filesystems and volumes of s that the daemon
// marks orphaned: attached to nothing, belonging to no storage instance.
func orphanedStorage(s params.StorageStatus) ([]params.FilesystemStatus, []params.ModelVolumeStatus) {
	var fss []params.FilesystemStatus
	for _, f := range s.Filesystems {
		if f.Orphaned {
			fss = append(fss, f)
		}
	}
	var vols []params.ModelVolumeStatus
	for _, v := range s.Volumes {
		if v.Orphaned {
			vols = append(vols, v)
		}
	}
	return fss, vols
}

// storageTag is the tag Juju names a filesystem or volume by
// ("filesystem-db-0-1", "volume-3").
func storageTag(kind, id string) string { return kind + "-" + strings.ReplaceAll(id, "/", "-") }

// volumeProviderID is the provider id of volume id in s ("-" if none).
func volumeProviderID(s params.StorageStatus, id string) string {
	for _, v := range s.Volumes {
		if v.ID == id && id != "" {
			return orDash(v.ProviderID)
		}
	}
	return "-"
}

func sizeOrDash(mib uint64) string {
	if mib == 0 {
		return "-"
	}
	return size.FormatMiB(mib)
}

func (a *app) storageCommand() *cobra.Command {
	var (
		format            formatFlag
		model             string
		filesystem, volum bool
	)
	cmd := &cobra.Command{
		Use:     "storage [--filesystem | --volume]",
		GroupID: "storage",
		Short:   "List a model's storage",
		Long: `List the storage of a model, as Juju's storage: the storage instances of
units (unit, kind, pool, size, status), or with --filesystem or --volume
the filesystems or volumes.

A storage instance attached to no unit shows ` + detachedWord + ` for its unit: it
was left by a unit that went (scale down, remove-application) or detached
(detach-storage), and stays until remove-storage takes it out. A filesystem
or volume that belongs to no storage instance and is attached to nothing
(an iaas volume whose machine went, a filesystem of a pod the unit
provisioner no longer reports) is listed as ` + orphanedWord + `; it goes with the model
(remove-model --destroy-storage or --release-storage).

json and yaml print Juju's shape ("storage", "filesystems" and "volumes",
keyed by id), as status does; sizes are MiB.`,
		Example: `  provisionctl storage -m k8s
  provisionctl storage --filesystem -m k8s
  provisionctl storage --volume --format yaml`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if filesystem && volum {
				return usagef("--filesystem and --volume cannot both be specified")
			}
			st, err := a.status(cmd, model)
			if err != nil {
				return err
			}
			return write(a.stdout, format, storageDocOf(st.Storage), func(w io.Writer) error {
				var t *table
				switch {
				case filesystem:
					t = filesystemsTable(st.Storage)
				case volum:
					t = volumesTable(st.Storage)
				default:
					t = storageTable(st.Storage)
				}
				if len(t.rows) == 0 {
					a.infof("No storage.")
					return nil
				}
				return t.write(w)
			})
		},
	}
	cmd.Flags().BoolVar(&filesystem, "filesystem", false, "list the filesystems")
	cmd.Flags().BoolVar(&volum, "volume", false, "list the volumes")
	a.addModelFlag(cmd, &model)
	addFormatFlag(cmd, &format)
	return cmd
}

// storageTable lists storage instances (detached ones first, as Juju
// sorts them by unit), then the orphaned filesystems and volumes.
func storageTable(s params.StorageStatus) *table {
	t := &table{header: []string{"UNIT", "STORAGE", "KIND", "POOL", "SIZE", "STATUS", "MESSAGE"}, cutLast: true}
	fsOf := map[string]params.FilesystemStatus{}
	for _, f := range s.Filesystems {
		fsOf[f.StorageID] = f
	}
	var rows [][]string
	for _, si := range s.Instances {
		f := fsOf[si.ID]
		unit := si.Unit
		if unit == "" {
			unit = detachedWord
		}
		rows = append(rows, []string{unit, si.ID, si.Kind, orDash(f.Pool), sizeOrDash(f.Size), orDash(f.Status.Status), f.Status.Message})
	}
	slices.SortStableFunc(rows, func(x, y []string) int {
		return strings.Compare(strings.TrimPrefix(x[0], detachedWord), strings.TrimPrefix(y[0], detachedWord))
	})
	fss, vols := orphanedStorage(s)
	for _, f := range fss {
		rows = append(rows, []string{orphanedWord, storageTag("filesystem", f.ID), "filesystem", orDash(f.Pool), sizeOrDash(f.Size),
			orDash(f.Status.Status), f.Status.Message})
	}
	for _, v := range vols {
		rows = append(rows, []string{orphanedWord, storageTag("volume", v.ID), "block", orDash(v.Pool), sizeOrDash(v.Size),
			orDash(v.Status.Status), v.Status.Message})
	}
	t.rows = rows
	return t
}

// filesystemsTable lists every filesystem: the unit it is attached to
// (detached or orphaned otherwise), its storage instance and volume.
func filesystemsTable(s params.StorageStatus) *table {
	t := &table{header: []string{"FILESYSTEM", "UNIT", "STORAGE", "VOLUME", "PROVIDER-ID", "MOUNTPOINT", "SIZE", "STATUS", "LIFE"}}
	for _, f := range s.Filesystems {
		unit, mount := detachedWord, "-"
		if f.Attachment != nil {
			unit, mount = f.Attachment.Unit, orDash(f.Attachment.MountPoint)
		} else if f.Orphaned {
			unit = orphanedWord
		}
		t.add(f.ID, unit, orDash(f.StorageID), volumeProviderID(s, f.VolumeID), orDash(f.ProviderID), mount, sizeOrDash(f.Size),
			orDash(f.Status.Status), f.Life)
	}
	return t
}

// volumesTable lists every volume: the machines or units it is attached to
// (detached or orphaned otherwise) and its storage instance.
func volumesTable(s params.StorageStatus) *table {
	t := &table{header: []string{"VOLUME", "ATTACHED", "STORAGE", "PROVIDER-ID", "DEVICE", "SIZE", "STATUS", "LIFE"}}
	for _, v := range s.Volumes {
		var to, devices []string
		for _, at := range v.Attached {
			if at.Machine != "" {
				to = append(to, "machine "+at.Machine)
			} else {
				to = append(to, at.Unit)
			}
			if at.DeviceName != "" {
				devices = append(devices, at.DeviceName)
			}
		}
		attached := strings.Join(to, ",")
		switch {
		case attached != "":
		case v.Orphaned:
			attached = orphanedWord
		default:
			attached = detachedWord
		}
		t.add(v.ID, attached, orDash(v.StorageID), orDash(v.ProviderID), orDash(strings.Join(devices, ",")), sizeOrDash(v.Size),
			orDash(v.Status.Status), v.Life)
	}
	return t
}

// removedStorageMutation lists storage taken out of a model under
// removed.storage, removed.filesystems and removed.volumes (released
// storage too: it is out of the model).
func removedStorageMutation(m *mutation, rs []params.RemovedStorage) {
	m.removed("storage").removed("filesystems").removed("volumes")
	for _, r := range rs {
		kind := r.Kind
		if kind != "storage" {
			kind += "s"
		}
		m.removed(kind, r.ID)
	}
}

// storageMessage says on stderr what storage a verb took out of a model:
// how much was destroyed, how much released and, for released storage, the
// provider ids left in the cloud.
func (a *app) storageMessage(rs []params.RemovedStorage) {
	count := func(released bool) string {
		n := map[string]int{}
		for _, r := range rs {
			if r.Released == released {
				n[r.Kind]++
			}
		}
		var parts []string
		for _, k := range []string{"storage", "filesystem", "volume"} {
			switch {
			case n[k] == 0:
			case k == "storage":
				parts = append(parts, fmt.Sprintf("%d storage %s", n[k], plural(n[k], "instance")))
			default:
				parts = append(parts, fmt.Sprintf("%d %s", n[k], plural(n[k], k)))
			}
		}
		return strings.Join(parts, ", ")
	}
	if d := count(false); d != "" {
		a.infof("Destroyed %s.", d)
	}
	if r := count(true); r != "" {
		var left []string
		for _, s := range rs {
			if s.Released && s.ProviderID != "" {
				left = append(left, s.ProviderID)
			}
		}
		msg := fmt.Sprintf("Released %s", r)
		if len(left) > 0 {
			msg += "; left in the cloud: " + strings.Join(left, ", ")
		}
		a.infof("%s.", msg)
	}
}

func (a *app) removeStorageCommand() *cobra.Command {
	var (
		format           formatFlag
		model            string
		force, noDestroy bool
	)
	cmd := &cobra.Command{
		Use:     "remove-storage STORAGE... [--force] [--no-destroy]",
		GroupID: "storage",
		Short:   "Remove storage from a model",
		Long: `Remove storage instances from a model, as Juju's remove-storage: each
with its filesystem and volume. Name them by storage id, as storage lists
them ("data/0"). All are checked first; then all are removed, or none.

By default storage attached to a unit is refused: detach it first
(detach-storage), or use --force, which detaches it. A unit is never left
below the minimum count its charm requires of that storage. The storage is
destroyed; with --no-destroy it is released instead: taken out of the model
and left in the cloud, no longer managed (the message lists the provider
ids left). Storage that cannot outlive its pod (tmpfs, rootfs) cannot be
released.

It prints a message, or with --format json or yaml what changed
(removed.storage, removed.filesystems, removed.volumes) with what was taken
out as result.`,
		Example: `  provisionctl remove-storage data/1 -m k8s
  provisionctl remove-storage data/0 --force -m k8s
  provisionctl remove-storage data/2 --no-destroy --format json`,
		Args:              minArgs(1, "STORAGE..."),
		ValidArgsFunction: a.completer(a.storageIDs),
		RunE: func(cmd *cobra.Command, ids []string) error {
			var res params.RemoveStorageResult
			err := a.call(cmd.Context(), "RemoveStorage", params.RemoveStorageArgs{Model: model, Storage: ids, Force: force, NoDestroy: noDestroy}, &res)
			var pe *params.Error
			if errors.As(err, &pe) && pe.Code == params.CodeStorageAttached {
				return fmt.Errorf("%w\n\nUse the --force option to remove attached storage, or use\ndetach-storage to detach it before removing it", err)
			}
			if err != nil {
				return err
			}
			m := newMutation().result(res.Removed)
			removedStorageMutation(m, res.Removed)
			return a.writeMutation(cmd.Context(), format, model, m, func() { a.storageMessage(res.Removed) })
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "remove storage even if it is attached to a unit (it is detached first)")
	cmd.Flags().BoolVar(&noDestroy, "no-destroy", false, "release the storage: take it out of the model, leave it in the cloud")
	a.addModelFlag(cmd, &model)
	addFormatFlag(cmd, &format)
	return cmd
}

func (a *app) detachStorageCommand() *cobra.Command {
	var (
		format formatFlag
		model  string
	)
	cmd := &cobra.Command{
		Use:     "detach-storage STORAGE...",
		GroupID: "storage",
		Short:   "Detach storage from its units",
		Long: `Detach storage instances from the units they are attached to, as Juju's
detach-storage. Name them by storage id ("data/0"). All are checked first;
then all are detached, or none. A unit is never left below the minimum
count its charm requires of that storage (storage declared without
"multiple" is singular, and never detached from a live unit). Storage
already detached is left as it is. The storage stays in the model,
detached, until remove-storage removes it or the model goes.

(Juju refuses detach-storage in Kubernetes models, whose pods keep their
volume claims; provisiond's storage instances are those of Kubernetes
units, and detaching one changes the model's records only: the pod keeps
its volume, and the unit provisioner's reports do not attach it again.)

It prints a message, or with --format json or yaml what changed
(changed.storage) with the ids detached as result.`,
		Example: `  provisionctl detach-storage data/1 -m k8s
  provisionctl detach-storage data/1 data/2 --format json`,
		Args:              minArgs(1, "STORAGE..."),
		ValidArgsFunction: a.completer(a.storageIDs),
		RunE: func(cmd *cobra.Command, ids []string) error {
			var res params.DetachStorageResult
			if err := a.call(cmd.Context(), "DetachStorage", params.DetachStorageArgs{Model: model, Storage: ids}, &res); err != nil {
				return err
			}
			return a.writeMutation(cmd.Context(), format, model, newMutation().changed("storage", res.Detached...).result(res.Detached), func() {
				if len(res.Detached) == 0 {
					a.infof("Nothing to detach: the storage is detached already.")
					return
				}
				a.infof("Detached storage %s.", strings.Join(res.Detached, ", "))
			})
		},
	}
	a.addModelFlag(cmd, &model)
	addFormatFlag(cmd, &format)
	return cmd
}
