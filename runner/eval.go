package runner

import (
	"slices"

	"resnetlab/data"
	"resnetlab/kernels"
	"resnetlab/model"
)

// EvalBatch is the reference's test batch size.
const EvalBatch = 128

// stepInput is a training step's input tensor and its upload staging,
// which an evaluation of batches of the same shape reuses.
type stepInput struct {
	x  *kernels.Tensor
	in *inputBuf
}

// evaluateModel runs m in eval mode over the whole test set (in order,
// last partial batch included) and returns the accuracy and the accuracy
// of each class. With dev (test held in be's memory) the batches are built
// there, else on the host. Batches the shape of step's input go through
// step's buffers (nil: none) instead of new ones, so that an evaluation
// between training steps holds no more input memory than the steps: under
// a Gemini device budget those bytes would count against it.
func evaluateModel(m *model.ResNet, be kernels.Backend, test *data.Dataset, dev *deviceSet, dt kernels.DType, batch int, step *stepInput) (float64, []float64) {
	if batch <= 0 {
		batch = EvalBatch
	}
	classes := len(test.Classes)
	loader := data.NewLoader(test, data.LoaderOptions{Batch: batch})
	var xh []float32
	if dev == nil {
		xh = make([]float32, batch*test.ImageLen())
	}
	yh := make([]float32, batch)
	logits := make([]float32, batch*classes)
	correct, total := make([]int, classes), make([]int, classes)
	var x, own *kernels.Tensor // own: the batch tensor this evaluation allocated
	var ownIn inputBuf
	in := &ownIn
	defer func() {
		if own != nil {
			be.Free(own)
		}
		ownIn.free(be)
	}()
	for s := 0; s < loader.Steps(0); s++ {
		n := len(loader.Indices(0, s))
		if x == nil || x.Shape[0] != n {
			if own != nil {
				be.Free(own)
				own = nil
			}
			if step != nil && step.x.DType == dt && slices.Equal(step.x.Shape, []int{n, test.C, data.Side, data.Side}) {
				x, in = step.x, step.in
			} else {
				own = be.New(kernels.CatData, dt, n, test.C, data.Side, data.Side)
				x, in = own, &ownIn
			}
		}
		if dev != nil {
			dev.batch(loader, 0, s, x, yh)
		} else {
			loader.Batch(0, s, xh, yh)
			in.upload(be, x, xh[:n*test.ImageLen()])
		}
		out := m.Forward(x, false)
		be.Download(out, logits[:n*classes])
		for i := 0; i < n; i++ {
			label := int(yh[i])
			total[label]++
			if argmax(logits[i*classes:(i+1)*classes]) == label {
				correct[label]++
			}
		}
	}
	all, right := 0, 0
	per := make([]float64, classes)
	for c := range per {
		all += total[c]
		right += correct[c]
		if total[c] > 0 {
			per[c] = float64(correct[c]) / float64(total[c])
		}
	}
	if all == 0 {
		return 0, per
	}
	return float64(right) / float64(all), per
}

// argmax is the index of the largest value (first on ties, as torch.max).
func argmax(v []float32) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}
