package gemini

import "fmt"

// TensorState is where a parameter tensor stands in Gemini's life cycle
// (ColossalAI's TensorState). FREE: its chunk's full payload is not
// materialised on this rank (a sharded chunk between uses). HOLD: the
// payload exists (on the device or in host memory) and nobody uses it.
// COMPUTE: an operator is using it. HOLD_AFTER_BWD: its module's backward
// is done. READY_FOR_REDUCE: its gradient is final and waits for the rest
// of its chunk before the chunk is reduced over ranks.
type TensorState uint8

const (
	Free TensorState = iota
	Compute
	Hold
	HoldAfterBwd
	ReadyForReduce
	numStates
)

var stateNames = [numStates]string{"FREE", "COMPUTE", "HOLD", "HOLD_AFTER_BWD", "READY_FOR_REDUCE"}

func (s TensorState) String() string {
	if s < numStates {
		return stateNames[s]
	}
	return fmt.Sprintf("TensorState(%d)", uint8(s))
}

// legal holds exactly the transitions listed in docs/design.md (Gemini).
var legal = map[[2]TensorState]bool{
	{Free, Hold}:                   true,
	{Free, Compute}:                true,
	{Hold, Free}:                   true,
	{Hold, Compute}:                true,
	{Compute, Hold}:                true,
	{Compute, HoldAfterBwd}:        true,
	{Compute, ReadyForReduce}:      true,
	{HoldAfterBwd, Compute}:        true,
	{HoldAfterBwd, ReadyForReduce}: true,
	{ReadyForReduce, Hold}:         true,
}

// Legal reports whether from -> to is an allowed transition.
func Legal(from, to TensorState) bool { return legal[[2]TensorState{from, to}] }

// transition moves t to state to, panicking on an illegal transition: it
// is always a bug in the manager, never a condition to recover from.
func (g *Gemini) transition(t *tensorInfo, to TensorState) {
	from := t.state
	if !Legal(from, to) {
		panic(fmt.Sprintf("memory: illegal tensor state transition %s -> %s for %s (chunk %d)", from, to, t.name, t.c.id))
	}
	t.state = to
	if g != nil && g.cfg.OnEvent != nil {
		g.cfg.OnEvent(StateChange{Rank: g.rank, Chunk: t.c.id, Tensor: t.name, From: from, To: to})
	}
}
