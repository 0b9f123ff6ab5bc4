// Package walkthrough holds the tests that keep the walk-throughs true:
// README.md's ("A first machine and a first pod") and docs/provisionctl.md's
// longer one ("Walk-through"). Each takes the README's quick start daemon
// command, runs the section's commands with the built binaries against a
// daemon started with --agent sim on a temporary data dir, and checks each
// `# ` line shown below a command (see the test for the placeholders). It
// has no code of its own.
package walkthrough
