//go:build !crashbug

package boltstore

// plantedBug is false in every normal build: the committer's call of
// plantEarlyReply is then dead code the compiler removes. Only the crash
// harness's planted-bug test builds with -tags crashbug (crashbug.go).
const plantedBug = false

func plantEarlyReply([]*request, []result, uint64) {}
