package kernels

// AsyncMover is an optional Backend extension for moving data between a
// device tensor and host memory off the compute path: a GPU backend runs
// the copies on a second (copy) stream, so they overlap the kernels of the
// compute stream. Gemini moves its chunks through it; MoverOf gives every
// Backend one (a synchronous one for backends without their own), so the
// caller's logic is the same on every backend.
//
// Ordering rules (what a GPU implementation guarantees):
//   - UploadAsync starts after the compute work issued so far (dst may have
//     just been allocated or freed by it) and returns at once; src may be
//     reused as soon as it returns. Compute ops read dst only after the
//     caller has passed the Move to Await.
//   - DownloadAsync starts after the compute work issued so far (src's last
//     use); dst holds the values once Finish(m) returned (or Done() said
//     true). Until then src must stay allocated and unchanged and dst must
//     not be touched.
//   - Await makes every compute op issued afterwards wait for m, without
//     blocking the host. Finish blocks the host until m is complete.
//   - A tensor written by an upload or read by a download is freed only
//     after its Move was awaited or finished (the allocator reuses blocks in
//     compute-stream order).
type AsyncMover interface {
	UploadAsync(dst *Tensor, src []float32) Move
	DownloadAsync(src *Tensor, dst []float32) Move
	Await(m Move)
	Finish(m Move)
}

// Move is one asynchronous copy.
type Move interface {
	// Done reports, without blocking, whether the copy has completed.
	Done() bool
}

// MoverOf returns b's own AsyncMover, or a synchronous one built on
// Upload and Download (every Move it returns is complete).
func MoverOf(b Backend) AsyncMover {
	if m, ok := b.(AsyncMover); ok {
		return m
	}
	return SyncMover{b}
}

// SyncMover moves data with the backend's blocking Upload and Download.
type SyncMover struct{ B Backend }

// Completed is a Move that has already completed.
var Completed Move = doneMove{}

type doneMove struct{}

func (doneMove) Done() bool { return true }

func (s SyncMover) UploadAsync(dst *Tensor, src []float32) Move {
	s.B.Upload(dst, src)
	return Completed
}

func (s SyncMover) DownloadAsync(src *Tensor, dst []float32) Move {
	s.B.Download(src, dst)
	return Completed
}

func (SyncMover) Await(Move)  {}
func (SyncMover) Finish(Move) {}

// PinnedHost is an optional AsyncMover extension: page-locked host memory
// that the device reads and writes by DMA directly, so a move whose host
// side is such a buffer skips the copy through the mover's staging. The
// contents of a new buffer are undefined. An upload from a pinned buffer
// reads it while the move runs: the buffer must not change until the move
// is done (Finish, or Done true); it may be freed at once (it is reused
// only after the move).
type PinnedHost interface {
	AllocPinned(n int) []float32
	FreePinned(buf []float32)
}
