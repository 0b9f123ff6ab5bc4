// Package walkthrough holds the test that keeps README.md's walk-through
// true: it takes the quick start's daemon command and every command of the
// "Operating it with provisionctl" section, runs them with the built
// binaries against a daemon started with --agent sim on a temporary data
// dir, and checks each `# ` line the README shows below a command (see
// the test for the placeholders). It has no code of its own.
package walkthrough
