package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"os"
	"sync"
	"time"
)

// Checkpoints off the writer. With wal_autocheckpoint alone, SQLite
// checkpoints in the connection whose commit left the WAL past the limit:
// the writer copies the WAL into the database file and fsyncs both
// between two batches, while every appender waits for it (measured in
// docs/benchmarks.md, the SQLite writer's CPU per append). Here a
// connection of its own does it, on another core: a PASSIVE checkpoint,
// which waits for no writer or reader and none waits for it.
//
// It runs by the WAL's growth, not by the clock: once runPages times the
// limit were appended since its last run, or a second after a commit for
// a trickle. A checkpoint copies each page once however many commits
// changed it since the last one, and a busy writer rewrites the same
// index pages commit after commit: copying them every few commits cost
// more than the commits' own writes.
//
// The writer keeps an autocheckpoint of its own, backstopPages times the
// limit, above what the checkpointer lets the WAL reach: it copies what
// the checkpointer left (little, unless that one fails or falls behind)
// and it is what rewinds the WAL under a steady load. SQLite starts the
// WAL over only at a write that begins when every frame was copied, and
// the writer's next batch begins while the checkpointer is still copying
// the last; the backstop's checkpoint, between two batches, copies all.

// runPages is how many pages, in limits, the writer appends to the WAL
// before the checkpointer copies them.
const runPages = 8

// checkpointEvery is the longest a committed page waits for the
// checkpointer when fewer than runPages limits follow it.
const checkpointEvery = time.Second

// backstopPages is the writer's own autocheckpoint, in limits: the WAL's
// size (in pages) at which it starts over.
const backstopPages = 32

// checkpointer checkpoints the WAL on a connection of its own.
type checkpointer struct {
	db    *sql.DB
	wal   walIndex
	pages uint32 // appended pages that start a run
	every time.Duration
	poke  chan struct{}
	quit  chan struct{}
	done  chan struct{}
	once  sync.Once
	// The loop's: a commit is not copied yet, and t runs until its run.
	pending bool
	t       *time.Timer
	// ran, when set, is told each run's error; seen, the WAL's length
	// after each commit was considered, and after its run if it started
	// one (tests).
	ran  func(error)
	seen func(frames uint32)
}

func newCheckpointer(db *sql.DB, path string, pages int, every time.Duration) *checkpointer {
	c := &checkpointer{db: db, wal: walIndex{path: path + "-shm"}, pages: uint32(max(pages, 1)), every: every,
		poke: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go c.loop()
	return c
}

// commit tells the checkpointer the writer committed. It returns at once:
// it runs on the writer's loop.
func (c *checkpointer) commit() {
	select {
	case c.poke <- struct{}{}:
	default: // one is pending already
	}
}

func (c *checkpointer) loop() {
	defer close(c.done)
	defer c.wal.close()
	c.t = time.NewTimer(time.Hour)
	c.t.Stop()
	defer c.t.Stop()
	var from uint32 // the WAL's last frame when the last run began
	for {
		select {
		case <-c.quit:
			return
		case <-c.t.C: // a trickle's commit waited long enough
			if mx, ok := c.wal.frames(); ok {
				from = mx
			}
			c.run()
		case <-c.poke:
			if !c.pending {
				c.pending = true
				c.t.Reset(c.every)
			}
			mx, ok := c.wal.frames()
			if !ok {
				continue // unreadable: the timer's run
			}
			if mx < from {
				from = 0 // the WAL started over
			}
			if mx-from >= c.pages {
				from = mx
				c.run()
			}
			c.saw(mx)
		}
	}
}

// run copies what it can of the WAL into the database file. Its failure
// is the writer's backstop's to make up for. What was committed before it
// is copied, or the writer's: nothing is pending.
func (c *checkpointer) run() {
	c.t.Stop()
	c.pending = false
	var busy, log, copied int64
	err := c.db.QueryRowContext(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &log, &copied)
	if c.ran != nil {
		c.ran(err)
	}
}

func (c *checkpointer) saw(frames uint32) {
	if c.seen != nil {
		c.seen(frames)
	}
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

// walIndex reads the WAL's length from the wal-index header SQLite keeps
// in the -shm file (https://sqlite.org/walformat.html#the_wal_index_file_format):
// a read of the shared file, which takes no lock and leaves SQLite alone.
type walIndex struct {
	path string
	f    *os.File
	buf  [walIndexHeader * 2]byte
}

// walIndexHeader is the size of one copy of the wal-index header; SQLite
// writes it twice, and a reader that sees two equal copies read it whole.
const walIndexHeader = 48

// walIndexVersion is the header's iVersion.
const walIndexVersion = 3007000

// frames is the WAL's last valid frame (mxFrame); false when the header
// cannot be read or is being written.
func (w *walIndex) frames() (uint32, bool) {
	if w.f == nil {
		f, err := os.Open(w.path)
		if err != nil {
			return 0, false
		}
		w.f = f
	}
	if n, err := w.f.ReadAt(w.buf[:], 0); n != len(w.buf) || err != nil {
		return 0, false
	}
	h, again := w.buf[:walIndexHeader], w.buf[walIndexHeader:]
	// The header is in the host's byte order; isInit at 12, mxFrame at 16.
	if !bytes.Equal(h, again) || binary.NativeEndian.Uint32(h) != walIndexVersion || h[12] != 1 {
		return 0, false
	}
	return binary.NativeEndian.Uint32(h[16:]), true
}

func (w *walIndex) close() {
	if w.f != nil {
		w.f.Close()
	}
}
