package sqlite

import (
	"context"
	"database/sql"
	"sync"
	"time"
)

// Checkpoints off the writer. With wal_autocheckpoint alone, SQLite
// checkpoints in the connection whose commit left the WAL past the limit:
// the writer copies the WAL into the database file and fsyncs both
// between two batches, while every appender waits for it (measured in
// docs/benchmarks.md, the SQLite writer's CPU per append). Here a
// connection of its own does it after commits, at most every
// checkpointEvery, on another core: a PASSIVE checkpoint, which waits for
// no writer or reader and none waits for it.
//
// The writer keeps an autocheckpoint of its own, backstopPages times
// the limit, for when this one falls behind or fails. It is also what
// restarts the WAL under a steady load: SQLite rewinds the WAL only at a
// write that begins when every frame was copied, and the writer's next
// batch begins while the checkpointer is still copying the last.

// checkpointEvery spaces the checkpointer's runs: about what SQLite's
// default limit (1 000 pages) takes the busiest writer to fill, and 20
// runs a second at most for a trickle of commits that each change the
// same few pages.
const checkpointEvery = 50 * time.Millisecond

// backstopPages is the writer's own autocheckpoint, in limits.
const backstopPages = 4

// checkpointer checkpoints the WAL on a connection of its own.
type checkpointer struct {
	db    *sql.DB
	every time.Duration
	poke  chan struct{}
	quit  chan struct{}
	done  chan struct{}
	once  sync.Once
	// ran, when set, is told each run's error (tests).
	ran func(error)
}

func newCheckpointer(db *sql.DB, every time.Duration) *checkpointer {
	c := &checkpointer{db: db, every: every, poke: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go c.loop()
	return c
}

// commit tells the checkpointer the writer committed. It returns at once:
// it runs on the writer's loop.
func (c *checkpointer) commit() {
	select {
	case c.poke <- struct{}{}:
	default: // a run is due already
	}
}

func (c *checkpointer) loop() {
	defer close(c.done)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-c.poke:
		case <-c.quit:
			return
		}
		err := c.run()
		if c.ran != nil {
			c.ran(err)
		}
		// Commits meanwhile leave one poke: the next run follows this
		// pause.
		t.Reset(c.every)
		select {
		case <-t.C:
		case <-c.quit:
			return
		}
	}
}

// run copies what it can of the WAL into the database file. Its failure
// is the writer's backstop's to make up for.
func (c *checkpointer) run() error {
	var busy, log, copied int64
	return c.db.QueryRowContext(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &log, &copied)
}

// close stops the checkpointer and closes its connection, after the run
// under way.
func (c *checkpointer) close() error {
	var err error
	c.once.Do(func() {
		close(c.quit)
		<-c.done
		err = c.db.Close()
	})
	return err
}
