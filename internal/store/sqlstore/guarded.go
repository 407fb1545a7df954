package sqlstore

import (
	"context"
	"database/sql"
	"sync"

	"github.com/studio/operator/internal/frametrace"
	"github.com/studio/operator/internal/store"
)

// A batch of appends in one round trip. The two round trips of a batch
// (lockedappends.go) exist because its checks need what the first reads:
// the conversations' next sequences and active turns, the fences'
// instances, the turns' owners. But a turn's appends follow each other
// on the daemon that runs it, so those are nearly always what this
// process's last commit left: the batch expects them (knownSequences),
// gives its frames their sequences beforehand, and sends everything at
// once: BEGIN, the conversations' lock, Guard (which checks, after the
// lock and in a statement of its own as the second round trip's reads
// do, that every expectation holds), the frames and their notification
// written only if Guard held, and COMMIT. When an expectation does not
// hold (another daemon appended, the turn ended, an instance was fenced)
// the transaction commits nothing and notifies nothing, and the batch
// runs the two round trips, whose checks give each append its answer.
// The expectations are a guess; Guard, under the lock, is the check.
//
// Durability before visibility is as for two round trips: the
// notification is delivered only once its transaction committed, and
// this process's streams get the frames after COMMIT answered.

// maxKnown bounds the conversations whose next sequence a Store keeps:
// past it the guesses start over (a missed guess costs a round trip).
const maxKnown = 1 << 14

// knownSequences are the next sequences this process's commits left its
// conversations at, as far as it saw them.
type knownSequences struct {
	mu   sync.Mutex
	next map[string]int64
}

// learn records the conversations' next sequences after the two round
// trips' commit.
func (k *knownSequences) learn(convs map[string]*convState) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for id, st := range convs {
		if st.found {
			k.set(id, st.next)
		}
	}
}

// advance moves the known conversations past frames another commit of
// this process appended (a turn's last frame, an ordinary append).
func (k *knownSequences) advance(frames []store.Frame) {
	if len(frames) == 0 {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, f := range frames {
		if n, ok := k.next[f.ConversationID]; ok && n <= f.Sequence {
			k.next[f.ConversationID] = f.Sequence + 1
		}
	}
}

func (k *knownSequences) set(id string, next int64) {
	if _, ok := k.next[id]; !ok && len(k.next) >= maxKnown {
		clear(k.next)
	}
	k.next[id] = next
}

// reserve returns the next sequences the batch's conversations are
// expected at and moves them past the batch's frames, so that a batch of
// the same conversation that a writer loop sends meanwhile expects what
// this one leaves. ok false: a conversation is not known.
func (k *knownSequences) reserve(frames map[string]int64) (first map[string]int64, ok bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	first = make(map[string]int64, len(frames))
	for id := range frames {
		n, known := k.next[id]
		if !known {
			return nil, false
		}
		first[id] = n
	}
	for id, n := range frames {
		k.next[id] = first[id] + n
	}
	return first, true
}

// forget drops the conversations: the next batch of each reads them.
func (k *knownSequences) forget(ids []string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, id := range ids {
		delete(k.next, id)
	}
}

// writeGuarded runs the batch in one round trip if this process knows
// what to expect of its conversations, and answers its appends; false:
// it did not (nothing was sent, or Guard did not hold and nothing
// landed), run the two round trips.
func (b *appendBatcher) writeGuarded(ctx context.Context, round Round, live []*lockedJob) bool {
	if b.q.Guard == "" {
		return false
	}
	// A conversation's appends of one batch are all its active turn's,
	// expected to pass: one request id each.
	reqs := make(map[string]string, len(live))
	counts := make(map[string]int64, len(live))
	for _, j := range live {
		a := j.app
		if r, ok := reqs[a.convID]; ok && r != a.reqID {
			return false
		}
		reqs[a.convID] = a.reqID
		counts[a.convID] += int64(len(a.payloads))
	}
	first, ok := b.known.reserve(counts)
	if !ok {
		return false
	}
	ids := make([]string, 0, len(first))
	for id := range first {
		ids = append(ids, id)
	}
	// The batch's expectations, as the checks would read them.
	convs := make(map[string]*convState, len(first))
	for id, n := range first {
		convs[id] = &convState{found: true, active: sql.NullString{String: reqs[id], Valid: true}, next: n, first: n}
	}
	instances := make(map[string]error)
	owners := make(map[string]sql.NullString)
	for _, j := range live {
		if a := j.app; a.instance != "" {
			instances[a.instance] = nil
			owners[a.reqID] = sql.NullString{String: a.instance, Valid: true}
		}
	}
	for _, j := range live {
		if admit(ctx, conn{}, j.app, convs, instances, owners) != nil {
			// Not reached: the expectations admit every append.
			b.known.forget(ids)
			return false
		}
	}
	held := false
	guard := Piped{Query: b.q.Guard, Args: guardArgs(convs, instances, owners), Row: func(scan func(...any) error) error {
		return scan(&held)
	}}
	notifiedIDs, notifiedFrames := notified(live)
	notifyQuery, notifyArgs := b.d.NotifyFramesStatement(notifiedIDs, notifiedFrames, true)
	if frametrace.On {
		for id, n := range first {
			frametrace.Stamp("sent", id, n, n+counts[id]-1)
		}
	}
	failed, err := round(ctx, Piped{Query: "BEGIN"}, Piped{Query: b.q.Lock, Args: []any{ids}}, guard,
		Piped{Query: b.q.GuardedWrite, Args: b.rows(live, convs)}, Piped{Query: notifyQuery, Args: notifyArgs}, Piped{Query: "COMMIT"})
	if err != nil || !held {
		b.known.forget(ids)
	}
	if err == nil && !held {
		return false // it committed nothing: the two round trips
	}
	if frametrace.On && err == nil {
		for id, n := range first {
			frametrace.Stamp("committed", id, n, n+counts[id]-1)
		}
	}
	b.answer(ctx, round, live, failed, 5, err)
	return true
}

// guardArgs are Guard's arguments: the conversations' ids, next
// sequences and active request ids; the instances; the turns' request ids
// and owners. Never nil slices: an empty list is an empty array.
func guardArgs(convs map[string]*convState, instances map[string]error, owners map[string]sql.NullString) []any {
	ids, next, reqs := []string{}, []int64{}, []string{}
	for id, st := range convs {
		ids, next, reqs = append(ids, id), append(next, st.first), append(reqs, st.active.String)
	}
	inst := []string{}
	for id := range instances {
		inst = append(inst, id)
	}
	turns, ownerIDs := []string{}, []string{}
	for req, owner := range owners {
		turns, ownerIDs = append(turns, req), append(ownerIDs, owner.String)
	}
	return []any{ids, next, reqs, inst, turns, ownerIDs}
}
