// Package fsutil opens and reads user-supplied files safely: it refuses
// anything that is not a regular file (a FIFO would block forever, a
// device such as /dev/zero would read until memory runs out) and never
// reads more than a caller-given limit. It also writes files atomically
// (WriteFileAtomic: the whole new file or the old one, never half;
// WriteFileNew: the whole new file or none, never over an existing one). It
// imports only the standard
// library so that every reader of user files can use it.
package fsutil
