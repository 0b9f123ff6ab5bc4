package dashboard

import (
	"strings"

	"github.com/provisiond/provisiond/rpc/params"
	"github.com/provisiond/provisiond/size"
)

// Attachment states of a storage row.
const (
	storageAttached = "attached" // to a unit or a machine
	// storageDetached: a storage instance attached to no unit (left by a
	// unit that went, or detach-storage), or a machine volume attached to
	// no machine.
	storageDetached = "detached"
	// storageOrphaned: a filesystem or volume attached to nothing that
	// belongs to no storage instance (the daemon marks it).
	storageOrphaned = "orphaned"
)

// storageRow is one line of the dashboard's storage table. The rows and
// their values are those of provisionctl status's storage section
// (cmd/provisionctl, applicationTables): each storage instance with its
// filesystem (pool, size, provider ids, status, mount point) and the
// volume behind it, then the orphaned filesystems and volumes named by
// their tags; then the machine volumes, which status lists under their
// machine.
type storageRow struct {
	Key  string `json:"key"`  // unique in the model: "storage/data/0", "filesystem/files/2/0", "volume/3"
	ID   string `json:"id"`   // as provisionctl names it: "data/0", "filesystem-files-2-0", "volume-3"
	Kind string `json:"kind"` // "filesystem" or "block"
	// State is storageAttached, storageDetached or storageOrphaned; To
	// is what it is attached to ("files/0", "machine 2").
	State string `json:"state"`
	To    string `json:"to,omitempty"`
	Life  string `json:"life"`
	Pool  string `json:"pool,omitempty"`
	Size  string `json:"size,omitempty"` // size.FormatMiB: "1G"
	// Filesystem and Volume are the provider's ids.
	Filesystem string            `json:"filesystem,omitempty"`
	Volume     string            `json:"volume,omitempty"`
	Status     params.StatusInfo `json:"status,omitzero"`
	// Location is the mount point of a filesystem, the device of a
	// volume.
	Location string `json:"location,omitempty"`
	Level    string `json:"level,omitempty"` // of the row's alert, if any
}

// storageTag is the tag Juju names a filesystem or volume by
// ("filesystem-files-2-0", "volume-3"), as provisionctl shows leftovers.
func storageTag(kind, id string) string { return kind + "-" + strings.ReplaceAll(id, "/", "-") }

func sizeOf(mib uint64) string {
	if mib == 0 {
		return ""
	}
	return size.FormatMiB(mib)
}

// storageRows lays out st's storage as the table shows it; as levels the
// alerts of its rows.
func storageRows(st *params.ModelStatus, as []alert) []storageRow {
	s := st.Storage
	level := map[string]string{}
	for _, a := range as {
		level[a.Kind+"/"+a.ID] = a.Level
	}
	vols := map[string]params.ModelVolumeStatus{}
	for _, v := range s.Volumes {
		vols[v.ID] = v
	}
	fsOf := map[string]params.FilesystemStatus{}
	backing := map[string]bool{} // volumes behind a filesystem
	for _, f := range s.Filesystems {
		if f.StorageID != "" {
			fsOf[f.StorageID] = f
		}
		if f.VolumeID != "" {
			backing[f.VolumeID] = true
		}
	}
	volOf := map[string]params.ModelVolumeStatus{}
	for _, v := range s.Volumes {
		if v.StorageID != "" {
			volOf[v.StorageID] = v
		}
	}
	out := []storageRow{}
	for _, si := range s.Instances {
		r := storageRow{Key: "storage/" + si.ID, ID: si.ID, Kind: si.Kind, Life: si.Life, State: storageDetached}
		if si.Unit != "" {
			r.State, r.To = storageAttached, si.Unit
		}
		r.Level = level["storage/"+si.ID]
		if f, ok := fsOf[si.ID]; ok {
			r.Pool, r.Size, r.Filesystem, r.Status = f.Pool, sizeOf(f.Size), f.ProviderID, f.Status
			if f.Attachment != nil {
				r.Location = f.Attachment.MountPoint
			}
			if f.VolumeID != "" {
				r.Volume = vols[f.VolumeID].ProviderID
			}
			r.Level = worse(r.Level, level["filesystem/"+f.ID])
		} else if v, ok := volOf[si.ID]; ok {
			// Block storage: the volume is the storage.
			r.Pool, r.Size, r.Volume, r.Status = v.Pool, sizeOf(v.Size), v.ProviderID, v.Status
			r.Location = devices(v)
			r.Level = worse(r.Level, level["volume/"+v.ID])
		}
		out = append(out, r)
	}
	for _, f := range s.Filesystems {
		if !f.Orphaned {
			continue
		}
		out = append(out, storageRow{Key: "filesystem/" + f.ID, ID: storageTag("filesystem", f.ID), Kind: "filesystem",
			State: storageOrphaned, Life: f.Life, Pool: f.Pool, Size: sizeOf(f.Size), Filesystem: f.ProviderID,
			Volume: vols[f.VolumeID].ProviderID, Status: f.Status, Level: level["filesystem/"+f.ID]})
	}
	for _, v := range s.Volumes {
		if !v.Orphaned {
			continue
		}
		out = append(out, storageRow{Key: "volume/" + v.ID, ID: storageTag("volume", v.ID), Kind: "block",
			State: storageOrphaned, Life: v.Life, Pool: v.Pool, Size: sizeOf(v.Size), Volume: v.ProviderID,
			Status: v.Status, Level: level["volume/"+v.ID]})
	}
	// Machine volumes: of no storage instance, not orphaned. Attached
	// is what their attachments say, whatever status the provider
	// last reported.
	for _, v := range s.Volumes {
		if v.Orphaned || v.StorageID != "" || backing[v.ID] {
			continue
		}
		r := storageRow{Key: "volume/" + v.ID, ID: storageTag("volume", v.ID), Kind: "block", State: storageDetached,
			Life: v.Life, Pool: v.Pool, Size: sizeOf(v.Size), Volume: v.ProviderID, Status: v.Status,
			Location: devices(v), Level: level["volume/"+v.ID]}
		var to []string
		for _, a := range v.Attached {
			if a.Machine != "" {
				to = append(to, "machine "+a.Machine)
			} else if a.Unit != "" {
				to = append(to, a.Unit)
			}
		}
		if len(to) > 0 {
			r.State, r.To = storageAttached, strings.Join(to, ", ")
		}
		out = append(out, r)
	}
	return out
}

// devices lists the device names of v's attachments.
func devices(v params.ModelVolumeStatus) string {
	var out []string
	for _, a := range v.Attached {
		if a.DeviceName != "" {
			out = append(out, a.DeviceName)
		}
	}
	return strings.Join(out, ", ")
}

// worse is the graver of two alert levels.
func worse(a, b string) string {
	if a == levelError || b == levelError {
		return levelError
	}
	if a == levelWarn || b == levelWarn {
		return levelWarn
	}
	return ""
}
