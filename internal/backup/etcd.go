package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/provisiond/provisiond/internal/controllerstore"
	"github.com/provisiond/provisiond/internal/migrate"
)

// Backup and restore on etcd. A daemon on etcd answers GET /backup with
// the same archive a bbolt daemon gives: the controller as a bbolt
// database (controllerstore.DBFile) and the data dir files of its identity
// (credentials.yaml with the passwords, the CA and server certificate and
// keys). The database is made from a dump of the prefix at one revision
// (store.Dumper: etcd reads it in pages at that revision, writers go on)
// loaded into a temporary bbolt file in the data dir, read back and
// checked, and then streamed as a bbolt daemon's snapshot is. So an
// archive of either store restores into either: Restore makes a bbolt
// data dir of it, RestoreToEtcd loads it into an empty etcd prefix.

// sharedSnapshotToTemp dumps the store into a new temporary bbolt file in
// the data dir and returns the identity's files and the file, positioned
// at its start, with its size. It must finish within
// backupSnapshotTimeout.
func (h *Handler) sharedSnapshotToTemp() ([]tarEntry, *os.File, int64, error) {
	id, ok, err := h.cfg.State.Identity(context.Background())
	if err != nil {
		return nil, nil, 0, err
	}
	if !ok {
		return nil, nil, 0, errors.New("the controller in the store has no identity record")
	}
	// The database is made in one temporary file and its snapshot
	// written to another, which is streamed.
	db, err := os.CreateTemp(h.cfg.DataDir, backupTempPrefix+"*.db")
	if err != nil {
		return nil, nil, 0, err
	}
	dbPath := db.Name()
	db.Close() // bbolt makes a database of the empty file
	defer os.Remove(dbPath)
	f, err := os.CreateTemp(h.cfg.DataDir, backupTempPrefix+"*.db")
	if err != nil {
		return nil, nil, 0, err
	}
	fail := func(err error) ([]tarEntry, *os.File, int64, error) {
		f.Close()
		os.Remove(f.Name())
		return nil, nil, 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), backupSnapshotTimeout)
	defer cancel()
	files, res, err := migrate.Snapshot(ctx, h.cfg.State, id, dbPath, f, h.log)
	if err != nil {
		return fail(err)
	}
	small := make([]tarEntry, len(files))
	for i, f := range files {
		small[i] = tarEntry{f.Name, f.Data}
	}
	size, err := f.Seek(0, io.SeekCurrent)
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		return fail(err)
	}
	h.log.Info("backup: snapshot of the store", "records", res.Records, "revision", res.SourceRevision, "history-records", res.History.Records, "took", res.Copy+res.Verify)
	return small, f, size, nil
}

// RestoreToEtcd loads a backup archive (of either store) into the empty
// etcd prefix of e: it is verified, unpacked and checked as Restore does
// (allowUnverified as RestoreOptions'), in a
// temporary directory under tmpDir ("" for the system's), and migrated
// from there as a stopped bbolt controller (migrate.Run: the identity from its
// files, the records loaded under the load's mark, read back and
// compared). progress is as migrate.Config's.
func RestoreToEtcd(ctx context.Context, archive io.Reader, e controllerstore.EtcdConfig, tmpDir string, allowUnverified bool, progress func(phase string, done, total int)) (migrate.Result, error) {
	cfg := migrate.Config{To: migrate.End{Store: controllerstore.StoreEtcd, Etcd: e}, From: migrate.End{Store: controllerstore.StoreBolt, DataDir: "archive"}, Progress: progress}
	if err := cfg.Validate(); err != nil {
		return migrate.Result{}, err
	}
	tmp, err := os.MkdirTemp(tmpDir, "provisiond-restore-")
	if err != nil {
		return migrate.Result{}, fmt.Errorf("restore: %w", err)
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, "data")
	if err := Restore(archive, dir, RestoreOptions{AllowUnverified: allowUnverified}); err != nil {
		return migrate.Result{}, err
	}
	cfg.From.DataDir = dir
	res, err := migrate.Run(ctx, cfg)
	if err != nil {
		return res, fmt.Errorf("restore: %w", err)
	}
	return res, nil
}
