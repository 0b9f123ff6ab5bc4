package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/provisiond/provisiond/state/store"
)

// etcd's space quota. Every commit writes a new version of the feed key,
// and etcd keeps every version until its history is compacted; compacted
// versions leave free pages in etcd's database file, which only a
// defragment gives back. etcd compares the file's size with its
// --quota-backend-bytes (2 GiB by default): past it, it raises the NOSPACE
// alarm and refuses every write, even one that would remove keys (every
// commit of ours also puts the feed key), until the alarm is disarmed.
// Then writes fail with store.ErrNoSpace, Health reports the alarm, and
// MemberStatus gives each member's database size against its quota for a
// metric to alert on before it happens. ReclaimSpace is the recovery.

// noSpaceRecovery says what an operator does about etcd's NOSPACE alarm.
const noSpaceRecovery = "compact and defragment etcd and disarm the alarm (provisiond reclaim-etcd-space), " +
	"or raise etcd's --quota-backend-bytes; see docs/scale-out.md"

// noSpaceError is etcd's space quota reached: store.ErrNoSpace, and
// store.ErrUnavailable to callers that know only that one (the store
// cannot commit now).
type noSpaceError struct{ msg string }

func (e noSpaceError) Error() string { return e.msg }

func (e noSpaceError) Is(target error) bool {
	return target == store.ErrNoSpace || target == store.ErrUnavailable
}

// alarms reports etcd's alarms as an error: NOSPACE as store.ErrNoSpace
// (and ErrUnavailable), CORRUPT as ErrUnavailable.
func (s *Store) alarms(ctx context.Context) error {
	resp, err := s.cli.AlarmList(ctx)
	if err != nil {
		return s.fail(ctx, "listing etcd's alarms", err)
	}
	for _, a := range resp.Alarms {
		switch a.Alarm {
		case etcdserverpb.AlarmType_NOSPACE:
			return noSpaceError{fmt.Sprintf("etcdstore: etcd's NOSPACE alarm is raised (member %x): its database reached its space quota and etcd refuses writes: %s",
				a.MemberID, noSpaceRecovery)}
		case etcdserverpb.AlarmType_CORRUPT:
			return fmt.Errorf("etcdstore: %w: etcd's CORRUPT alarm is raised (member %x): a member's data differs from the others' and etcd refuses writes (see etcd's documentation)",
				store.ErrUnavailable, a.MemberID)
		}
	}
	return nil
}

// SpaceReport is what ReclaimSpace found and did.
type SpaceReport struct {
	// Before and After are each member's status before the compaction
	// and after the defragments.
	Before, After []MemberStatus
	// Compacted is the revision etcd's history was compacted to (0: it
	// was compacted there already).
	Compacted int64
	// Disarmed are the NOSPACE alarms disarmed, as "member <id>".
	Disarmed []string
	// Full are the members whose database is still at or over its quota
	// (their alarms stay: raise etcd's --quota-backend-bytes).
	Full []string
}

// ReclaimSpace gives etcd's cluster room for writes again, or before it
// runs out: it compacts etcd's history to the current revision (daemons
// whose watch is current go on; one catching up from before it reloads
// its replica, as after a long cut), defragments each member in turn (the
// leader last; a member answers nothing while it defragments, seconds per
// GiB), and, if every member's database is then below its quota, disarms
// the NOSPACE alarms. It needs every member to answer, and etcd's root
// role when etcd's auth is enabled (defragment and disarm are an
// administrator's). cfg names the cluster: its endpoints, TLS and auth
// (the rest is unused); ctx bounds the whole.
func ReclaimSpace(ctx context.Context, cfg Config, log *slog.Logger) (SpaceReport, error) {
	var rep SpaceReport
	if len(cfg.Endpoints) == 0 {
		return rep, errors.New("etcdstore: no endpoints")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	ccfg, err := clientConfig(cfg)
	if err != nil {
		return rep, err
	}
	ccfg.DialKeepAliveTime, ccfg.DialKeepAliveTimeout = 0, 0 // a defragment may be silent for minutes
	cli, err := clientv3.New(ccfg)
	if err != nil {
		return rep, fmt.Errorf("etcdstore: connect to %s: %w", strings.Join(cfg.Endpoints, ","), err)
	}
	defer cli.Close()

	// statuses asks every member for its status; leader is the leader's
	// endpoint.
	statuses := func() (out []MemberStatus, leader string, err error) {
		for _, ep := range cfg.Endpoints {
			st, err := cli.Status(ctx, ep)
			if err != nil {
				return nil, "", fmt.Errorf("etcdstore: etcd member %s does not answer (%w): every member must, to be defragmented", ep, err)
			}
			out = append(out, MemberStatus{Endpoint: ep, Up: st.Leader != 0, DBSize: st.DbSize, DBSizeInUse: st.DbSizeInUse, DBQuota: st.DbSizeQuota})
			if st.Leader == st.Header.MemberId {
				leader = ep
			}
		}
		return out, leader, nil
	}
	if rep.Before, _, err = statuses(); err != nil {
		return rep, err
	}

	// Any read's header gives the cluster's current revision.
	resp, err := cli.Get(ctx, PrefixRegistry, clientv3.WithCountOnly())
	if err != nil {
		return rep, fmt.Errorf("etcdstore: reading etcd's revision: %w", err)
	}
	rev := resp.Header.Revision
	switch _, err := cli.Compact(ctx, rev, clientv3.WithCompactPhysical()); {
	case errors.Is(err, rpctypes.ErrCompacted):
	case err != nil:
		return rep, fmt.Errorf("etcdstore: compacting etcd's history to revision %d: %w", rev, err)
	default:
		rep.Compacted = rev
		log.Info("compacted etcd's history", "revision", rev)
	}

	// Followers first: the leader's defragment stalls every write.
	_, leader, err := statuses()
	if err != nil {
		return rep, err
	}
	order := slices.DeleteFunc(slices.Clone(cfg.Endpoints), func(e string) bool { return e == leader })
	if leader != "" {
		order = append(order, leader)
	}
	for _, ep := range order {
		log.Info("defragmenting etcd member", "endpoint", ep)
		if _, err := cli.Defragment(ctx, ep); err != nil {
			return rep, fmt.Errorf("etcdstore: defragmenting etcd member %s: %w", ep, err)
		}
	}
	if rep.After, _, err = statuses(); err != nil {
		return rep, err
	}
	for _, m := range rep.After {
		if m.DBQuota > 0 && m.DBSize >= m.DBQuota {
			rep.Full = append(rep.Full, m.Endpoint)
		}
	}
	if len(rep.Full) > 0 {
		return rep, nil
	}
	alarms, err := cli.AlarmList(ctx)
	if err != nil {
		return rep, fmt.Errorf("etcdstore: listing etcd's alarms: %w", err)
	}
	for _, a := range alarms.Alarms {
		if a.Alarm != etcdserverpb.AlarmType_NOSPACE {
			continue
		}
		if _, err := cli.AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: a.MemberID, Alarm: a.Alarm}); err != nil {
			return rep, fmt.Errorf("etcdstore: disarming the NOSPACE alarm of member %x: %w", a.MemberID, err)
		}
		rep.Disarmed = append(rep.Disarmed, fmt.Sprintf("member %x", a.MemberID))
		log.Info("disarmed etcd's NOSPACE alarm", "member", fmt.Sprintf("%x", a.MemberID))
	}
	return rep, nil
}
