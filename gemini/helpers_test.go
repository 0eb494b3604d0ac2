package gemini

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"resnetlab/comm"
	"resnetlab/data"
	"resnetlab/engine"
	"resnetlab/kernels"
	"resnetlab/kernels/cpu"
	"resnetlab/model"
)

// The tests train a width-8 ResNet-18 on synthetic images with CPU ranks:
// the device is a CPU backend too, so every code path of a GPU run (moves,
// budgets, collectives, HybridAdam on both sides) runs, in exact arithmetic.

const testWidth = 8

var testData = sync.OnceValue(func() *data.Dataset {
	train, _ := data.Synthetic(160, 10, 7)
	return train
})

var testScaler = engine.ScalerConfig{InitialScale: 32, GrowthFactor: 2, BackoffFactor: 0.5, GrowthInterval: 1000, Hysteresis: 2}

// batchOf uploads batch step of epoch 0 of rank/world's shard.
func batchOf(be kernels.Backend, dt kernels.DType, batch, step, rank, world int) (x, y *kernels.Tensor) {
	ds := testData()
	l := data.NewLoader(ds, data.TrainOptions(batch, 3, rank, world))
	xh := make([]float32, batch*ds.ImageLen())
	yh := make([]float32, batch)
	l.Batch(0, step, xh, yh)
	x = be.New(kernels.CatData, dt, batch, ds.C, 32, 32)
	y = be.New(kernels.CatData, kernels.F32, batch)
	be.Upload(x, xh)
	be.Upload(y, yh)
	return x, y
}

func newModel(be kernels.Backend, dt kernels.DType) *model.ResNet {
	return model.NewResNet18(be, model.Config{Width: testWidth, InChannels: 3, NumClasses: 10, DType: dt, Seed: 11})
}

// watchBackend records the device's true peak (folding the peak in before
// every ResetPeak, which Gemini's tracer calls per operator) and counts
// allocations that leave the total above the budget once armed.
type watchBackend struct {
	kernels.Backend
	budget int64
	armed  bool
	peak   int64
	over   int
	sync   bool // move with blocking Upload/Download instead of the backend's mover
}

func (w *watchBackend) fold() { w.peak = max(w.peak, w.Backend.MemStats().TotalPeak) }

func (w *watchBackend) ResetPeak() {
	if w.armed {
		w.fold()
	}
	w.Backend.ResetPeak()
}

func (w *watchBackend) New(cat kernels.Category, dt kernels.DType, shape ...int) *kernels.Tensor {
	t := w.Backend.New(cat, dt, shape...)
	if w.armed && w.budget > 0 && w.Backend.MemStats().Total() > w.budget {
		w.over++
	}
	return t
}

// mover is the wrapped backend's mover, so a GPU under watch still moves
// chunks on its copy stream, or blocking moves when w.sync is set.
func (w *watchBackend) mover() kernels.AsyncMover {
	if w.sync {
		return kernels.SyncMover{B: w.Backend}
	}
	return kernels.MoverOf(w.Backend)
}

func (w *watchBackend) UploadAsync(dst *kernels.Tensor, src []float32) kernels.Move {
	return w.mover().UploadAsync(dst, src)
}

func (w *watchBackend) DownloadAsync(src *kernels.Tensor, dst []float32) kernels.Move {
	return w.mover().DownloadAsync(src, dst)
}

func (w *watchBackend) Await(m kernels.Move)  { w.mover().Await(m) }
func (w *watchBackend) Finish(m kernels.Move) { w.mover().Finish(m) }

// AllocPinned and FreePinned forward to the wrapped backend's pinned
// memory, so a GPU under watch moves by DMA as in a run; on a backend
// without any they hand out Go memory, so the CPU tests still run
// Gemini's pinned-host bookkeeping.
func (w *watchBackend) AllocPinned(n int) []float32 {
	if p, ok := w.Backend.(kernels.PinnedHost); ok {
		return p.AllocPinned(n)
	}
	return make([]float32, n)
}

func (w *watchBackend) FreePinned(buf []float32) {
	if p, ok := w.Backend.(kernels.PinnedHost); ok {
		p.FreePinned(buf)
	}
}

// Adopt and AdamStepTo forward to a wrapped host backend (the CPU
// backend), so a watched host tier is pinned and updates early as in a run.
func (w *watchBackend) Adopt(cat kernels.Category, dt kernels.DType, host []float32, shape ...int) *kernels.Tensor {
	return w.Backend.(adopter).Adopt(cat, dt, host, shape...)
}

func (w *watchBackend) AdamStepTo(po, mo, vo, p, grad, m, v *kernels.Tensor, hp kernels.AdamParams) bool {
	return w.Backend.(adamTo).AdamStepTo(po, mo, vo, p, grad, m, v, hp)
}

func (w *watchBackend) arm() {
	w.Backend.ResetPeak()
	w.armed, w.peak = true, 0
}

func (w *watchBackend) Peak() int64 {
	w.fold()
	return w.peak
}

// rankResult is what one rank of a run returns.
type rankResult struct {
	state     *engine.State
	stats     Stats
	peak      int64 // device peak over the steps (watchBackend)
	over      int   // allocations over the budget
	losses    []float32
	skipped   []bool    // per step: the overflow vote skipped its update
	logits    []float32 // eval-mode forward of batch 0 after training
	chunks    []ChunkInfo
	host      kernels.MemStats // Gemini's host memory accounting at the end
	events    map[string]int
	moves     []MoveEvent
	lag       *lagMover        // the simulated copy engine, when the run had one
	badSC     string           // the first state change that broke the life cycle
	steps     []Stats          // Stats after every step
	lagged    [2]int           // the lagMover's moves and stalls when stats was read
	snaps     []ChunksEvent    // mid-step chunk snapshots (Op set)
	mems      []MemStatsEvent  // one per step
	trace     []StateChange    // every state change after New
	inStep    int              // moves issued inside the steps (before the evaluation)
	hostAt    kernels.MemStats // host accounting after the last step
	evalMoves []int            // chunk moves and clean drops of each evaluation
	evalSame  bool             // every evaluation gave the first one's logits
}

type runSpec struct {
	world, batch int
	from, steps  int // batches from..steps-1 of epoch 0
	lr           float32
	gem          Config
	deviceComm   bool          // comm.DeviceComm instead of HostTensorComm
	load         *engine.State // loaded before the first step when set
	lag          int           // > 0: moves go through a lagMover with this lag
	evals        int           // evaluations of batch from after training (0 means 1)
	overflowAt   int           // > 0: this step runs at a loss scale of 2^24, so it overflows
}

// runGemini trains spec on world CPU ranks.
func runGemini(t testing.TB, spec runSpec) []rankResult {
	t.Helper()
	out, err := runGeminiErr(spec)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func runGeminiErr(spec runSpec) ([]rankResult, error) {
	out := make([]rankResult, spec.world)
	err := comm.Launch(spec.world, func(c *comm.Coordinator) error {
		r := &out[c.Rank()]
		r.events = map[string]int{}
		cfg := spec.gem
		last := map[string]TensorState{}
		cfg.OnEvent = func(e any) {
			r.events[fmt.Sprintf("%T", e)]++
			switch e := e.(type) {
			case MoveEvent:
				r.moves = append(r.moves, e)
			case ChunksEvent:
				if e.Op != "" {
					r.events["mid"]++
					r.snaps = append(r.snaps, e)
				}
			case MemStatsEvent:
				r.mems = append(r.mems, e)
			case StateChange:
				r.trace = append(r.trace, e)
				if (e.From != last[e.Tensor] || !Legal(e.From, e.To)) && r.badSC == "" {
					r.badSC = fmt.Sprintf("%s: %s -> %s (was %s)", e.Tensor, e.From, e.To, last[e.Tensor])
				}
				last[e.Tensor] = e.To
			}
		}
		w := &watchBackend{Backend: cpu.New(), budget: cfg.DeviceBudget}
		var err error
		var dev kernels.Backend = w
		if spec.lag > 0 {
			r.lag = &lagMover{Backend: w, lag: spec.lag}
			dev = r.lag
		}
		m := newModel(dev, cfg.Precision)
		var dc comm.DeviceCommunicator = comm.NewHostTensorComm(c.Comm())
		if spec.deviceComm { // on the wrapped backend, which owns the tensors
			if dc, err = comm.NewDeviceComm(w.Backend, c.Comm()); err != nil {
				return err
			}
		}
		g, err := New(dev, cpu.New(), dc, m, cfg)
		if err != nil {
			return err
		}
		defer m.Free()
		defer g.Free()
		n := max(spec.steps, spec.from+1) // batch from is also the eval batch
		xs, ys := make([]*kernels.Tensor, n), make([]*kernels.Tensor, n)
		for s := spec.from; s < n; s++ {
			xs[s], ys[s] = batchOf(dev, cfg.Precision, spec.batch, s, c.Rank(), spec.world)
		}
		w.arm()
		if spec.load != nil {
			if err := g.LoadState(spec.load); err != nil {
				return err
			}
		}
		for s := spec.from; s < spec.steps; s++ {
			var keep float64
			if s == spec.overflowAt && s > 0 { // the scaler goes on as if nothing happened
				keep, g.tail.Scaler.Scale = g.tail.Scaler.Scale, 1<<24
			}
			st, err := g.Step(xs[s], ys[s], spec.lr)
			if keep != 0 {
				g.tail.Scaler.Scale = keep
			}
			if err != nil {
				return fmt.Errorf("step %d: %w", s, err)
			}
			r.losses = append(r.losses, st.Loss)
			r.skipped = append(r.skipped, st.Skipped)
			r.steps = append(r.steps, g.Stats())
		}
		r.inStep, r.hostAt = len(r.moves), g.HostMemStats()
		if r.state, err = g.State(); err != nil {
			return err
		}
		// Evaluation outside Step: every rank runs it (sharded chunks are
		// all-gathered); it must keep the budget too.
		r.evalSame = true
		for e := range max(spec.evals, 1) {
			before := g.Stats()
			logits := m.Forward(xs[spec.from], false)
			got := make([]float32, logits.Len())
			w.Download(logits, got)
			after := g.Stats()
			r.evalMoves = append(r.evalMoves, after.Moves+after.CleanDrops-before.Moves-before.CleanDrops)
			if e == 0 {
				r.logits = got
			} else if !slices.Equal(got, r.logits) {
				r.evalSame = false
			}
		}
		r.peak, r.over, r.stats, r.chunks, r.host = w.Peak(), w.over, g.Stats(), g.Chunks(), g.HostMemStats()
		if r.lag != nil {
			r.lagged = [2]int{r.lag.moves, r.lag.stalls}
		}
		return nil
	})
	return out, err
}

// runEngine trains the same batches with engine.Engine.
func runEngine(t testing.TB, spec runSpec, ecfg engine.EngineConfig) []*engine.State {
	t.Helper()
	out := make([]*engine.State, spec.world)
	err := comm.Launch(spec.world, func(c *comm.Coordinator) error {
		be := cpu.New()
		m := newModel(be, ecfg.Precision)
		e, err := engine.NewEngine(be, comm.NewHostTensorComm(c.Comm()), m, ecfg)
		if err != nil {
			return err
		}
		defer m.Free()
		defer e.Free()
		if spec.load != nil {
			if err := e.LoadState(spec.load); err != nil {
				return err
			}
		}
		for s := spec.from; s < spec.steps; s++ {
			x, y := batchOf(be, ecfg.Precision, spec.batch, s, c.Rank(), spec.world)
			if _, err := e.Step(x, y, spec.lr); err != nil {
				return err
			}
		}
		out[c.Rank()], err = e.State()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// stateDiff describes the first difference between two states ("" if none).
func stateDiff(a, b *engine.State) string {
	if len(a.Model) != len(b.Model) || a.Step != b.Step {
		return fmt.Sprintf("%d/%d model entries, step %d/%d", len(a.Model), len(b.Model), a.Step, b.Step)
	}
	for i := range a.Model {
		x, y := a.Model[i], b.Model[i]
		if x.Name != y.Name || len(x.Data) != len(y.Data) || len(x.Int64) != len(y.Int64) {
			return fmt.Sprintf("entry %d: %s vs %s", i, x.Name, y.Name)
		}
		for j := range x.Data {
			if x.Data[j] != y.Data[j] {
				return fmt.Sprintf("%s[%d]: %g vs %g", x.Name, j, x.Data[j], y.Data[j])
			}
		}
		for j := range x.Int64 {
			if x.Int64[j] != y.Int64[j] {
				return fmt.Sprintf("%s: %d vs %d", x.Name, x.Int64[j], y.Int64[j])
			}
		}
	}
	for i := range a.ExpAvg {
		for j := range a.ExpAvg[i] {
			if a.ExpAvg[i][j] != b.ExpAvg[i][j] || a.ExpAvgSq[i][j] != b.ExpAvgSq[i][j] {
				return fmt.Sprintf("moments of param %d differ at %d", i, j)
			}
		}
	}
	if (a.Scaler == nil) != (b.Scaler == nil) || (a.Scaler != nil && a.Scaler.Scale != b.Scaler.Scale) {
		return "loss scalers differ"
	}
	return ""
}
