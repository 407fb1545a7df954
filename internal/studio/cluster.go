package studio

import (
	"context"

	"github.com/studio/operator/internal/store"
)

// ClusterReport is the daemons that share the database (their instances
// and leases) and who owns the work in flight: doctor's view of several
// daemons on one PostgreSQL. A daemon alone with its SQLite file lists
// itself and the earlier processes it recovered from.
type ClusterReport struct {
	// Self is the instance of the daemon that answers ("" when doctor
	// read the database directly).
	Self      string           `json:"self,omitempty"`
	Lease     LeaseReport      `json:"lease"`
	Live      int              `json:"live"`
	Expired   int              `json:"expired"`
	Instances []InstanceReport `json:"instances"`
	// Turns and Runs are the unfinished turns and runs with their owner.
	Turns []OwnedReport `json:"turns"`
	Runs  []OwnedReport `json:"runs"`
}

// LeaseReport is the answering daemon's lease settings (zero when doctor
// read the database directly).
type LeaseReport struct {
	RenewSeconds  float64 `json:"renewSeconds"`
	ExpirySeconds float64 `json:"expirySeconds"`
}

// InstanceReport is one daemon process.
type InstanceReport struct {
	ID             string   `json:"id"`
	Address        string   `json:"address"`
	PID            int64    `json:"pid"`
	Version        string   `json:"version"`
	State          string   `json:"state"` // live, expired, stopped, reaped
	StartedAt      float64  `json:"startedAt"`
	HeartbeatAt    float64  `json:"heartbeatAt"`
	LeaseExpiresAt float64  `json:"leaseExpiresAt"`
	EndedAt        *float64 `json:"endedAt"` // stopped or reaped
}

// OwnedReport is one unfinished turn or run and its owner.
type OwnedReport struct {
	ID             string `json:"id"`
	ConversationID string `json:"conversationId,omitempty"`
	Status         string `json:"status"`
	// Owner is the owner instance, "" for none: a queued run (any daemon
	// claims it) or a turn waiting for a human (any daemon continues it).
	Owner      string `json:"owner"`
	OwnerState string `json:"ownerState,omitempty"`
}

// cluster builds the report; problem records what is wrong.
func (s *Service) cluster(ctx context.Context, problem func(fail bool, format string, args ...any)) ClusterReport {
	r := ClusterReport{Self: s.cfg.Instance, Instances: []InstanceReport{}, Turns: []OwnedReport{}, Runs: []OwnedReport{},
		Lease: LeaseReport{RenewSeconds: s.cfg.Lease.Renew.Seconds(), ExpirySeconds: s.cfg.Lease.Expiry.Seconds()}}
	if s.cfg.Lease.Renew == 0 {
		r.Self = "" // no lease kept: doctor reads the database, no daemon answers
	}
	now := s.now()
	ins, err := s.store.ListInstances(ctx, store.ListInstancesParams{Limit: 100})
	if err != nil {
		problem(false, "the daemons' instances cannot be listed: %v", err)
		return r
	}
	states := map[string]store.InstanceState{}
	for _, in := range ins {
		st := in.State(now)
		states[in.ID] = st
		ended := in.StoppedAt
		if ended == nil {
			ended = in.ReapedAt
		}
		r.Instances = append(r.Instances, InstanceReport{ID: in.ID, Address: in.Address, PID: in.PID, Version: in.Version,
			State: string(st), StartedAt: stamp(in.StartedAt), HeartbeatAt: stamp(in.HeartbeatAt),
			LeaseExpiresAt: stamp(in.LeaseExpiresAt), EndedAt: stampPtr(ended)})
		switch st {
		case store.InstanceLive:
			r.Live++
		case store.InstanceExpired:
			r.Expired++
		}
	}
	// On a database one daemon holds (SQLite), an expired instance is an
	// earlier process that ended without stopping, or the source daemon
	// of a restored copy: its work was recovered at this start, and no
	// other daemon will take anything over. Only a shared database has a
	// takeover to wait for.
	if r.Expired > 0 && s.cfg.Shared {
		problem(false, "%d daemons lost their lease and no live daemon has taken their work over yet; a running daemon on this database does within its lease renewal interval", r.Expired)
	}
	w, err := s.store.ActiveWork(ctx, store.ActiveWorkParams{Limit: 100})
	if err != nil {
		problem(false, "the owners of the work in flight cannot be listed: %v", err)
		return r
	}
	owned := func(id, conv, status, owner string) OwnedReport {
		o := OwnedReport{ID: id, ConversationID: conv, Status: status, Owner: owner}
		if owner != "" {
			o.OwnerState = string(states[owner])
			if o.OwnerState == "" {
				o.OwnerState = "unknown"
			}
		}
		return o
	}
	for _, t := range w.Turns {
		if !s.conversationVisible(ctx, t.ConversationID) {
			continue // another principal's private conversation's
		}
		r.Turns = append(r.Turns, owned(t.RequestID, t.ConversationID, string(t.Status), t.Owner))
	}
	for _, run := range w.Runs {
		r.Runs = append(r.Runs, owned(run.ID, "", string(run.Status), run.Owner))
	}
	return r
}
