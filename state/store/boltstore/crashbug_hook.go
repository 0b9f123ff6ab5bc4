package boltstore

// plantedEarlyReply is a deliberately planted durability bug, for the crash
// harness (internal/crashtest) to prove that it catches one. It is nil in
// every normal build; only a build with -tags crashbug (crashbug.go) sets
// it. When set, the committer calls it after a batch's functions have run
// and before the bbolt commit, with the batch and what it is about to
// commit.
var plantedEarlyReply func(batch []*request, committed []Committed)
