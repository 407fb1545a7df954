package sqlite

// The writer's WAL writes, gathered: a VFS of the store's own, wrapping
// SQLite's default "unix" one, under which the writer connection alone
// opens the database. SQLite writes a commit into the WAL one frame at a
// time, and each frame as two pwrites (its 24-byte header, then the
// page): a commit of a few hundred pages cost as many system calls, a
// third of the process's CPU at 100 appenders. This VFS keeps the WAL's
// sequential writes in one buffer and hands them to the OS in writes of
// up to 124 KiB before anything that must see the file's true contents:
// the sync of every commit, a read that overlaps the buffer, the file's
// size, a truncation, a file control, a write elsewhere in the file,
// closing it, and the buffer's cap.
//
// Why no other connection can see a frame still in the buffer: a WAL
// frame becomes visible to readers (and to the checkpointer) only when
// the writer publishes the wal-index header, after every frame of the
// commit is written and, with synchronous=FULL, after the WAL's xSync
// (wal.c, walFrames: the sync, then walIndexWriteHdr). The buffer is
// handed to the OS at that xSync. A transaction's spilled pages (frames
// written before its commit) are not in the published header either.
// So gathering is sound only on a connection that syncs every commit:
// Open gives the VFS to the writer only, whose synchronous is FULL, and
// checks it (checkWriterSyncs). Readers and the checkpointer open the
// file through "unix" and read what the OS has. Nor is it sound where
// SQLite pads commits to sectors, which it does when the device lacks
// powersafe overwrite: such a WAL is written through (gatherOpen).
//
// A kill loses what the buffer held, which SQLite's recovery treats as it
// treats a commit cut short by a power failure: frames after the last
// synced commit are not part of the database.

import (
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"modernc.org/libc"
	"modernc.org/libc/sys/types"
	sqlite3 "modernc.org/sqlite/lib"
)

// gatherVFSName is the VFS's name in SQLite's registry (the DSN's vfs).
const gatherVFSName = "studio-walgather"

// gatherCap bounds a WAL file's buffer: a run of writes that outgrows it
// is handed to the OS and a new run begins. A commit of 1 000 small
// appends on as many conversations is ~2 MiB of frames.
const gatherCap = 4 << 20

// gatherHdr is the head of the sqlite3_file this VFS gives SQLite for a
// WAL file: SQLite's base (its methods), the handle of the file's Go
// state, then the "unix" VFS's own file object.
type gatherHdr struct {
	base sqlite3.Tsqlite3_file
	h    uintptr
}

const gatherInnerOff = unsafe.Sizeof(gatherHdr{})

var gather struct {
	once  sync.Once
	err   error
	inner uintptr // the "unix" sqlite3_vfs
	open  func(*libc.TLS, uintptr, uintptr, uintptr, int32, uintptr) int32

	mu    sync.Mutex
	files map[uintptr]*walBuffer
	next  uintptr
}

// walBuffer is a WAL file's state: the "unix" file it wraps and the run
// of writes not yet handed to the OS, at [off, off+n) of the file. Its
// connection calls it from one goroutine at a time; the counters are
// read by tests and benchmarks.
type walBuffer struct {
	path  string
	inner uintptr // the "unix" file object
	buf   uintptr // gatherCap bytes of C memory, allocated at the first write
	off   int64
	n     int64
	// direct: every write goes to the OS as SQLite makes it.
	direct bool

	writes   atomic.Int64 // SQLite's xWrite calls
	osWrites atomic.Int64 // the writes handed to the OS
}

// gatherFaults holds the WAL paths whose writes to the OS fail (tests).
var gatherFaults sync.Map

var gatherMethods sqlite3.Tsqlite3_io_methods

// registerGatherVFS registers the VFS once per process.
func registerGatherVFS() error {
	gather.once.Do(func() { gather.err = doRegisterGatherVFS() })
	return gather.err
}

func doRegisterGatherVFS() error {
	tls := libc.NewTLS()
	defer tls.Close()
	inner := sqlite3.Xsqlite3_vfs_find(tls, 0)
	if inner == 0 {
		return fmt.Errorf("sqlite: no default VFS")
	}
	iv := (*sqlite3.Tsqlite3_vfs)(cptr(inner))
	gather.inner = inner
	gather.open = *(*func(*libc.TLS, uintptr, uintptr, uintptr, int32, uintptr) int32)(unsafe.Pointer(&iv.FxOpen))
	gather.files = map[uintptr]*walBuffer{}

	m := &gatherMethods
	m.FiVersion = 3
	setFn(&m.FxClose, gatherClose)
	setFn(&m.FxRead, gatherRead)
	setFn(&m.FxWrite, gatherWrite)
	setFn(&m.FxTruncate, gatherTruncate)
	setFn(&m.FxSync, gatherSync)
	setFn(&m.FxFileSize, gatherFileSize)
	setFn(&m.FxLock, gatherLock)
	setFn(&m.FxUnlock, gatherUnlock)
	setFn(&m.FxCheckReservedLock, gatherCheckReservedLock)
	setFn(&m.FxFileControl, gatherFileControl)
	setFn(&m.FxSectorSize, gatherSectorSize)
	setFn(&m.FxDeviceCharacteristics, gatherDeviceCharacteristics)
	setFn(&m.FxShmMap, gatherShmMap)
	setFn(&m.FxShmLock, gatherShmLock)
	setFn(&m.FxShmBarrier, gatherShmBarrier)
	setFn(&m.FxShmUnmap, gatherShmUnmap)
	setFn(&m.FxFetch, gatherFetch)
	setFn(&m.FxUnfetch, gatherUnfetch)

	// The VFS is a copy of "unix" but for its name, its files' size and
	// xOpen; it is never freed (registered once per process).
	v := libc.Xmalloc(tls, types.Size_t(unsafe.Sizeof(sqlite3.Tsqlite3_vfs{})))
	if v == 0 {
		return fmt.Errorf("sqlite: out of memory")
	}
	name, err := libc.CString(gatherVFSName)
	if err != nil {
		return err
	}
	vv := (*sqlite3.Tsqlite3_vfs)(cptr(v))
	*vv = *iv
	vv.FpNext = 0
	vv.FzName = name
	vv.FszOsFile = int32(gatherInnerOff) + iv.FszOsFile
	setFn(&vv.FxOpen, gatherOpen)
	if rc := sqlite3.Xsqlite3_vfs_register(tls, v, 0); rc != sqlite3.SQLITE_OK {
		return fmt.Errorf("sqlite: registering VFS %s: %d", gatherVFSName, rc)
	}
	return nil
}

// cptr turns an address in SQLite's memory into a pointer.
func cptr(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }

// setFn stores Go function f in a C struct's function pointer field, as
// the transpiled SQLite calls them.
func setFn[F any](field *uintptr, f F) { *(*F)(unsafe.Pointer(field)) = f }

// fn reads a function pointer field as a Go function.
func fn[F any](field uintptr) F { return *(*F)(unsafe.Pointer(&field)) }

func innerMethods(pInner uintptr) *sqlite3.Tsqlite3_io_methods {
	return (*sqlite3.Tsqlite3_io_methods)(cptr((*sqlite3.Tsqlite3_file)(cptr(pInner)).FpMethods))
}

func gatherOpen(tls *libc.TLS, pVfs, zName, pFile uintptr, flags int32, pOutFlags uintptr) int32 {
	if flags&sqlite3.SQLITE_OPEN_WAL == 0 {
		// The database file and any journal are "unix"'s own.
		return gather.open(tls, gather.inner, zName, pFile, flags, pOutFlags)
	}
	hdr := (*gatherHdr)(cptr(pFile))
	*hdr = gatherHdr{}
	inner := pFile + gatherInnerOff
	if rc := gather.open(tls, gather.inner, zName, inner, flags, pOutFlags); rc != sqlite3.SQLITE_OK {
		return rc
	}
	b := &walBuffer{path: libc.GoString(zName), inner: inner}
	// Without powersafe overwrite SQLite pads a commit to a sector and
	// syncs mid-frame, writing the rest after the sync and publishing it
	// unsynced (wal.c, walWriteToLog): such a WAL is written through.
	if db := sqlite3.Xsqlite3_database_file_object(tls, zName); db != 0 {
		dc := fn[func(*libc.TLS, uintptr) int32](innerMethods(db).FxDeviceCharacteristics)(tls, db)
		b.direct = dc&sqlite3.SQLITE_IOCAP_POWERSAFE_OVERWRITE == 0
	} else {
		b.direct = true
	}
	gather.mu.Lock()
	gather.next++
	h := gather.next
	gather.files[h] = b
	gather.mu.Unlock()
	hdr.h = h
	hdr.base.FpMethods = uintptr(unsafe.Pointer(&gatherMethods))
	return sqlite3.SQLITE_OK
}

func fileOf(pFile uintptr) *walBuffer {
	h := (*gatherHdr)(cptr(pFile)).h
	gather.mu.Lock()
	b := gather.files[h]
	gather.mu.Unlock()
	return b
}

// flush hands the buffer to the OS.
func (b *walBuffer) flush(tls *libc.TLS) int32 {
	n := b.n
	b.n = 0
	return b.writeOS(tls, b.buf, n, b.off)
}

// writeOS writes n bytes at p to the file at off, in pieces of at most
// gatherChunk: "unix" masks a write's length to 17 bits (os_unix.c,
// seekAndWriteFd) and would take a larger one for a short write.
func (b *walBuffer) writeOS(tls *libc.TLS, p uintptr, n, off int64) int32 {
	if _, bad := gatherFaults.Load(b.path); bad && n > 0 {
		return sqlite3.SQLITE_IOERR_WRITE
	}
	write := fn[func(*libc.TLS, uintptr, uintptr, int32, int64) int32](innerMethods(b.inner).FxWrite)
	for done := int64(0); done < n; done += gatherChunk {
		b.osWrites.Add(1)
		if rc := write(tls, b.inner, p+uintptr(done), int32(min(n-done, gatherChunk)), off+done); rc != sqlite3.SQLITE_OK {
			return rc
		}
	}
	return sqlite3.SQLITE_OK
}

// gatherChunk is the most one write hands "unix" (a multiple of 4 KiB
// below 128 KiB).
const gatherChunk = 0x1f000

func gatherClose(tls *libc.TLS, pFile uintptr) int32 {
	b := fileOf(pFile)
	rc := b.flush(tls)
	if b.buf != 0 {
		libc.Xfree(tls, b.buf)
		b.buf = 0
	}
	rc2 := fn[func(*libc.TLS, uintptr) int32](innerMethods(b.inner).FxClose)(tls, b.inner)
	gather.mu.Lock()
	delete(gather.files, (*gatherHdr)(cptr(pFile)).h)
	gather.mu.Unlock()
	if rc != sqlite3.SQLITE_OK {
		return rc
	}
	return rc2
}

func gatherRead(tls *libc.TLS, pFile, zBuf uintptr, iAmt int32, iOfst int64) int32 {
	b := fileOf(pFile)
	if b.n > 0 && iOfst < b.off+b.n && iOfst+int64(iAmt) > b.off {
		if rc := b.flush(tls); rc != sqlite3.SQLITE_OK {
			return rc
		}
	}
	return fn[func(*libc.TLS, uintptr, uintptr, int32, int64) int32](innerMethods(b.inner).FxRead)(tls, b.inner, zBuf, iAmt, iOfst)
}

func gatherWrite(tls *libc.TLS, pFile, zBuf uintptr, iAmt int32, iOfst int64) int32 {
	b := fileOf(pFile)
	b.writes.Add(1)
	n := int64(iAmt)
	if b.direct {
		return b.writeOS(tls, zBuf, n, iOfst)
	}
	src := unsafe.Slice((*byte)(cptr(zBuf)), n)
	switch {
	case b.n > 0 && iOfst == b.off+b.n && b.n+n <= gatherCap:
		copy(unsafe.Slice((*byte)(cptr(b.buf+uintptr(b.n))), n), src)
		b.n += n
		return sqlite3.SQLITE_OK
	case b.n > 0 && iOfst >= b.off && iOfst+n <= b.off+b.n:
		copy(unsafe.Slice((*byte)(cptr(b.buf+uintptr(iOfst-b.off))), n), src)
		return sqlite3.SQLITE_OK
	}
	if rc := b.flush(tls); rc != sqlite3.SQLITE_OK {
		return rc
	}
	if n >= gatherChunk {
		return b.writeOS(tls, zBuf, n, iOfst)
	}
	if b.buf == 0 {
		if b.buf = libc.Xmalloc(tls, gatherCap); b.buf == 0 {
			return sqlite3.SQLITE_NOMEM
		}
	}
	copy(unsafe.Slice((*byte)(cptr(b.buf)), n), src)
	b.off, b.n = iOfst, n
	return sqlite3.SQLITE_OK
}

func gatherTruncate(tls *libc.TLS, pFile uintptr, size int64) int32 {
	b := fileOf(pFile)
	if rc := b.flush(tls); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return fn[func(*libc.TLS, uintptr, int64) int32](innerMethods(b.inner).FxTruncate)(tls, b.inner, size)
}

func gatherSync(tls *libc.TLS, pFile uintptr, flags int32) int32 {
	b := fileOf(pFile)
	if rc := b.flush(tls); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return fn[func(*libc.TLS, uintptr, int32) int32](innerMethods(b.inner).FxSync)(tls, b.inner, flags)
}

func gatherFileSize(tls *libc.TLS, pFile, pSize uintptr) int32 {
	b := fileOf(pFile)
	if rc := b.flush(tls); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return fn[func(*libc.TLS, uintptr, uintptr) int32](innerMethods(b.inner).FxFileSize)(tls, b.inner, pSize)
}

func gatherLock(tls *libc.TLS, pFile uintptr, lock int32) int32 {
	b := fileOf(pFile)
	return fn[func(*libc.TLS, uintptr, int32) int32](innerMethods(b.inner).FxLock)(tls, b.inner, lock)
}

func gatherUnlock(tls *libc.TLS, pFile uintptr, lock int32) int32 {
	b := fileOf(pFile)
	return fn[func(*libc.TLS, uintptr, int32) int32](innerMethods(b.inner).FxUnlock)(tls, b.inner, lock)
}

func gatherCheckReservedLock(tls *libc.TLS, pFile, pResOut uintptr) int32 {
	b := fileOf(pFile)
	return fn[func(*libc.TLS, uintptr, uintptr) int32](innerMethods(b.inner).FxCheckReservedLock)(tls, b.inner, pResOut)
}

func gatherFileControl(tls *libc.TLS, pFile uintptr, op int32, pArg uintptr) int32 {
	b := fileOf(pFile)
	if rc := b.flush(tls); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return fn[func(*libc.TLS, uintptr, int32, uintptr) int32](innerMethods(b.inner).FxFileControl)(tls, b.inner, op, pArg)
}

func gatherSectorSize(tls *libc.TLS, pFile uintptr) int32 {
	b := fileOf(pFile)
	return fn[func(*libc.TLS, uintptr) int32](innerMethods(b.inner).FxSectorSize)(tls, b.inner)
}

func gatherDeviceCharacteristics(tls *libc.TLS, pFile uintptr) int32 {
	b := fileOf(pFile)
	return fn[func(*libc.TLS, uintptr) int32](innerMethods(b.inner).FxDeviceCharacteristics)(tls, b.inner)
}

// SQLite maps the wal-index and memory-maps through the database file,
// never the WAL's; these pass through all the same.

func gatherShmMap(tls *libc.TLS, pFile uintptr, iPg, pgsz, bExtend int32, pp uintptr) int32 {
	b := fileOf(pFile)
	return fn[func(*libc.TLS, uintptr, int32, int32, int32, uintptr) int32](innerMethods(b.inner).FxShmMap)(tls, b.inner, iPg, pgsz, bExtend, pp)
}

func gatherShmLock(tls *libc.TLS, pFile uintptr, offset, n, flags int32) int32 {
	b := fileOf(pFile)
	return fn[func(*libc.TLS, uintptr, int32, int32, int32) int32](innerMethods(b.inner).FxShmLock)(tls, b.inner, offset, n, flags)
}

func gatherShmBarrier(tls *libc.TLS, pFile uintptr) {
	b := fileOf(pFile)
	fn[func(*libc.TLS, uintptr)](innerMethods(b.inner).FxShmBarrier)(tls, b.inner)
}

func gatherShmUnmap(tls *libc.TLS, pFile uintptr, deleteFlag int32) int32 {
	b := fileOf(pFile)
	return fn[func(*libc.TLS, uintptr, int32) int32](innerMethods(b.inner).FxShmUnmap)(tls, b.inner, deleteFlag)
}

func gatherFetch(tls *libc.TLS, pFile uintptr, iOfst int64, iAmt int32, pp uintptr) int32 {
	b := fileOf(pFile)
	if rc := b.flush(tls); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return fn[func(*libc.TLS, uintptr, int64, int32, uintptr) int32](innerMethods(b.inner).FxFetch)(tls, b.inner, iOfst, iAmt, pp)
}

func gatherUnfetch(tls *libc.TLS, pFile uintptr, iOfst int64, p uintptr) int32 {
	b := fileOf(pFile)
	return fn[func(*libc.TLS, uintptr, int64, uintptr) int32](innerMethods(b.inner).FxUnfetch)(tls, b.inner, iOfst, p)
}

// checkWriterSyncs refuses a writer that does not sync the WAL at every
// commit (PRAGMA synchronous below FULL): its gathered frames could be
// published to readers before the OS has them.
func checkWriterSyncs(w *sql.DB) error {
	var level int
	if err := w.QueryRow("PRAGMA synchronous").Scan(&level); err != nil {
		return err
	}
	if level < 2 {
		return fmt.Errorf("sqlite: the writer's synchronous is %d, not FULL: its WAL writes are gathered until each commit's sync", level)
	}
	return nil
}
