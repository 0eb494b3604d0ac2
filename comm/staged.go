package comm

import "resnetlab/kernels"

// StagedComm runs a host Communicator on any backend's tensors by copying
// them to host memory and back. It is the portable path for device ranks
// of one process (several ranks on one GPU, or GPUs without NCCL); NCCL is
// the fast path. Results equal HostTensorComm's bit for bit.
type StagedComm struct {
	be   kernels.Backend
	c    Communicator
	a, b []float32 // staging, grown on demand
}

// NewStagedComm wraps c for tensors of be.
func NewStagedComm(be kernels.Backend, c Communicator) *StagedComm { return &StagedComm{be: be, c: c} }

func (s *StagedComm) Rank() int      { return s.c.Rank() }
func (s *StagedComm) WorldSize() int { return s.c.WorldSize() }

func grow(buf []float32, n int) []float32 {
	if cap(buf) < n {
		return make([]float32, n)
	}
	return buf[:n]
}

// solo is a world of one: every collective is the identity (Avg over one
// rank divides by 1), so the device data never needs to visit the host.
func (s *StagedComm) solo() bool { return s.c.WorldSize() == 1 }

func (s *StagedComm) AllReduce(t *kernels.Tensor, op Op) error {
	if s.solo() {
		return nil
	}
	s.a = grow(s.a, t.Len())
	s.be.Download(t, s.a)
	if err := s.c.AllReduce(s.a, op); err != nil {
		return err
	}
	s.be.Upload(t, s.a)
	return nil
}

func (s *StagedComm) ReduceScatter(dst, src *kernels.Tensor, op Op) error {
	if s.solo() {
		s.be.Copy(dst, src)
		return nil
	}
	s.a, s.b = grow(s.a, src.Len()), grow(s.b, dst.Len())
	s.be.Download(src, s.a)
	if err := s.c.ReduceScatter(s.b, s.a, op); err != nil {
		return err
	}
	s.be.Upload(dst, s.b)
	return nil
}

func (s *StagedComm) AllGather(dst, src *kernels.Tensor) error {
	if s.solo() {
		s.be.Copy(dst, src)
		return nil
	}
	s.a, s.b = grow(s.a, src.Len()), grow(s.b, dst.Len())
	s.be.Download(src, s.a)
	if err := s.c.AllGather(s.b, s.a); err != nil {
		return err
	}
	s.be.Upload(dst, s.b)
	return nil
}

func (s *StagedComm) Broadcast(t *kernels.Tensor, root int) error {
	if s.solo() {
		return nil
	}
	s.a = grow(s.a, t.Len())
	s.be.Download(t, s.a)
	if err := s.c.Broadcast(s.a, root); err != nil {
		return err
	}
	s.be.Upload(t, s.a)
	return nil
}

// Barrier waits for this rank's queued device work, then for every rank.
func (s *StagedComm) Barrier() error {
	if err := s.be.Sync(); err != nil {
		return err
	}
	return s.c.Barrier()
}
