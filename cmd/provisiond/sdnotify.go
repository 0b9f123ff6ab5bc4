package main

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// sd_notify(3), in the few lines it takes: systemd's service manager
// listens on a datagram socket named by $NOTIFY_SOCKET ("@name" is in the
// abstract namespace) for newline-separated KEY=VALUE assignments. A unit
// with Type=notify waits for READY=1 before it counts the service as
// started; with WatchdogSec= it expects WATCHDOG=1 at least every
// $WATCHDOG_USEC and restarts the service otherwise. This is written here
// rather than imported (github.com/coreos/go-systemd/v22/daemon does the
// same) because the protocol is one datagram per message and the daemon
// needs nothing else from that module.

// notifier sends state changes to systemd; a nil notifier (no
// $NOTIFY_SOCKET: not run by systemd, or not Type=notify) does nothing.
type notifier struct {
	addr *net.UnixAddr
}

// newNotifier reads $NOTIFY_SOCKET.
func newNotifier(getenv func(string) string) *notifier {
	name := getenv("NOTIFY_SOCKET")
	if name == "" {
		return nil
	}
	if name[0] == '@' {
		name = "\x00" + name[1:]
	}
	return &notifier{addr: &net.UnixAddr{Name: name, Net: "unixgram"}}
}

// notify sends one message, such as "READY=1\nSTATUS=serving".
func (n *notifier) notify(msg string) error {
	if n == nil {
		return nil
	}
	conn, err := net.DialUnix("unixgram", nil, n.addr)
	if err != nil {
		return fmt.Errorf("sd_notify: %w", err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(msg)); err != nil {
		return fmt.Errorf("sd_notify: %w", err)
	}
	return nil
}

// watchdogInterval is how often to send WATCHDOG=1: half of
// $WATCHDOG_USEC, as sd_watchdog_enabled(3) advises, when the watchdog is
// meant for this process ($WATCHDOG_PID, if set, is ours); 0 otherwise.
func watchdogInterval(getenv func(string) string) time.Duration {
	usec, err := strconv.ParseInt(strings.TrimSpace(getenv("WATCHDOG_USEC")), 10, 64)
	if err != nil || usec <= 0 {
		return 0
	}
	if pid := getenv("WATCHDOG_PID"); pid != "" && pid != strconv.Itoa(os.Getpid()) {
		return 0
	}
	return time.Duration(usec) * time.Microsecond / 2
}
