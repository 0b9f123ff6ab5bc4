package boltstore

// OpenReaders returns how many bbolt read transactions are open on the
// file at this moment (View, Snapshot, Stats, ... in progress). A reader
// held open keeps bbolt from reusing the pages freed after it began, and
// makes a remap of the memory map wait for it; tests use this to check
// that nothing holds one where nothing should (a backup whose client
// stalls: internal/daemon's TestBackupStalledClient).
func (s *Store) OpenReaders() int { return s.bolt.Stats().OpenTxN }
