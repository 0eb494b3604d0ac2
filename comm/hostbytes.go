package comm

// HostBytes is the host memory the staging buffers hold now (they grow to
// the largest collective and stay).
func (s *StagedComm) HostBytes() int64 { return 4 * int64(cap(s.a)+cap(s.b)) }
