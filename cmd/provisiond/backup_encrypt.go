package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"filippo.io/age"
	"github.com/spf13/pflag"
	"golang.org/x/term"
)

// Backup archives hold credentials.yaml (the admin's and the controller
// agent's passwords, in plain text) and the CA's private key. backup
// encrypts them with age (filippo.io/age: a small, audited format and
// library, with passphrases through scrypt and public keys through
// X25519), so an archive can be stored where others can read it; restore
// recognises an encrypted archive by its header and decrypts it while it
// unpacks.

// ageHeader starts every binary age file.
const ageHeader = "age-encryption.org/"

// archiveKeys are the encryption flags of backup and restore.
type archiveKeys struct {
	encrypt        bool     // backup: a passphrase (scrypt)
	recipients     []string // backup: age public keys
	recipientsFile string   // backup: a file of age public keys
	passphraseFile string   // both: the passphrase's file
	identityFile   string   // restore: age identities (private keys)

	// askTTY is where a passphrase is asked for when no file gives it;
	// /dev/tty when nil (tests replace it).
	askTTY func() (*os.File, error)
}

func (k *archiveKeys) backupFlags(fs *pflag.FlagSet, e sys) {
	fs.BoolVar(&k.encrypt, "encrypt", false, "encrypt the archive with a passphrase (age, scrypt): from --passphrase-file, else asked twice on the terminal")
	fs.StringArrayVar(&k.recipients, "recipient", nil, "encrypt the archive to this age public key (age1...; repeatable): no passphrase, restore needs the private key")
	fs.StringVar(&k.recipientsFile, "recipients-file", "", "encrypt the archive to the age public keys in FILE, one a line")
	fs.StringVar(&k.passphraseFile, "passphrase-file", e.getenv("PROVISIOND_PASSPHRASE_FILE"), "with --encrypt: read the passphrase from the first line of FILE ($PROVISIOND_PASSPHRASE_FILE)")
}

func (k *archiveKeys) restoreFlags(fs *pflag.FlagSet, e sys) {
	fs.StringVar(&k.passphraseFile, "passphrase-file", e.getenv("PROVISIOND_PASSPHRASE_FILE"), "an encrypted archive's passphrase, the first line of FILE (else asked on the terminal) ($PROVISIOND_PASSPHRASE_FILE)")
	fs.StringVar(&k.identityFile, "identity", "", "age identity file (private keys, as age-keygen writes) for an archive encrypted with --recipient")
}

// recipientsFor checks backup's encryption flags before anything is
// fetched and returns the recipients (none: a plain archive).
func (k *archiveKeys) recipientsFor() ([]age.Recipient, error) {
	keyed := len(k.recipients) > 0 || k.recipientsFile != ""
	if k.encrypt && keyed {
		return nil, usagef("--encrypt (a passphrase) and --recipient/--recipients-file (public keys) do not go together: choose one")
	}
	if keyed {
		var text strings.Builder
		for _, r := range k.recipients {
			text.WriteString(r + "\n")
		}
		if k.recipientsFile != "" {
			b, err := os.ReadFile(k.recipientsFile)
			if err != nil {
				return nil, fmt.Errorf("--recipients-file: %w", err)
			}
			text.Write(b)
			text.WriteString("\n")
		}
		rs, err := age.ParseRecipients(strings.NewReader(text.String()))
		if err != nil {
			return nil, usagef("--recipient: %v (an age public key starts with age1; make a key pair with age-keygen)", err)
		}
		return rs, nil
	}
	if !k.encrypt {
		return nil, nil
	}
	pass, err := k.passphrase(true)
	if err != nil {
		return nil, err
	}
	r, err := age.NewScryptRecipient(pass)
	if err != nil {
		return nil, err
	}
	return []age.Recipient{r}, nil
}

// passphrase reads it from --passphrase-file, else asks on the terminal
// (twice when it is a new one).
func (k *archiveKeys) passphrase(confirm bool) (string, error) {
	if k.passphraseFile != "" {
		b, err := os.ReadFile(k.passphraseFile)
		if err != nil {
			return "", fmt.Errorf("--passphrase-file: %w", err)
		}
		line, _, _ := strings.Cut(string(b), "\n")
		line = strings.TrimSuffix(line, "\r")
		if line == "" {
			return "", fmt.Errorf("--passphrase-file %s: the first line is empty (it is the passphrase)", k.passphraseFile)
		}
		return line, nil
	}
	open := k.askTTY
	if open == nil {
		open = func() (*os.File, error) { return os.OpenFile("/dev/tty", os.O_RDWR, 0) }
	}
	tty, err := open()
	if err != nil || !term.IsTerminal(int(tty.Fd())) {
		if tty != nil {
			tty.Close()
		}
		return "", errors.New("a passphrase is needed and there is no terminal to ask on: give --passphrase-file FILE")
	}
	defer tty.Close()
	ask := func(prompt string) (string, error) {
		fmt.Fprint(tty, prompt)
		b, err := term.ReadPassword(int(tty.Fd()))
		fmt.Fprintln(tty)
		return string(b), err
	}
	p, err := ask("Passphrase: ")
	if err != nil {
		return "", err
	}
	if p == "" {
		return "", errors.New("the passphrase is empty")
	}
	if confirm {
		again, err := ask("The same passphrase again: ")
		if err != nil {
			return "", err
		}
		if again != p {
			return "", errors.New("the two passphrases differ")
		}
	}
	return p, nil
}

// encryptTo wraps w: what is written through the result is encrypted to
// rs (nil: w itself). Close finishes the age stream, not w.
func encryptTo(w io.Writer, rs []age.Recipient) (io.WriteCloser, error) {
	if len(rs) == 0 {
		return nopCloser{w}, nil
	}
	return age.Encrypt(w, rs...)
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// openArchive returns the tar stream of an archive: r itself, or r
// decrypted when it starts with age's header.
func (k *archiveKeys) openArchive(r io.Reader) (io.Reader, error) {
	br := bufio.NewReader(r)
	head, _ := br.Peek(len(ageHeader))
	if !bytes.Equal(head, []byte(ageHeader)) {
		if k.identityFile != "" {
			return nil, errors.New("the archive is not encrypted, yet --identity was given: is it the right file?")
		}
		return br, nil
	}
	var ids []age.Identity
	if k.identityFile != "" {
		f, err := os.Open(k.identityFile)
		if err != nil {
			return nil, fmt.Errorf("--identity: %w", err)
		}
		ids, err = age.ParseIdentities(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("--identity %s: %w", k.identityFile, err)
		}
	} else {
		pass, err := k.passphrase(false)
		if err != nil {
			return nil, fmt.Errorf("the archive is encrypted: %w (or --identity FILE for one encrypted to a public key)", err)
		}
		id, err := age.NewScryptIdentity(pass)
		if err != nil {
			return nil, err
		}
		ids = []age.Identity{id}
	}
	tar, err := age.Decrypt(br, ids...)
	if err != nil {
		var none *age.NoIdentityMatchError
		if errors.As(err, &none) {
			return nil, errors.New("cannot decrypt the archive: wrong passphrase or identity (an archive made with --recipient needs --identity, one made with --encrypt its passphrase)")
		}
		return nil, fmt.Errorf("cannot decrypt the archive: %w", err)
	}
	return tar, nil
}
