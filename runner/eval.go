package runner

import (
	"resnetlab/data"
	"resnetlab/kernels"
	"resnetlab/model"
)

// EvalBatch is the reference's test batch size.
const EvalBatch = 128

// evaluateModel runs m in eval mode over the whole test set (in order,
// last partial batch included) and returns the accuracy and the accuracy
// of each class. With dev (test held in be's memory) the batches are built
// there, else on the host.
func evaluateModel(m *model.ResNet, be kernels.Backend, test *data.Dataset, dev *deviceSet, dt kernels.DType, batch int) (float64, []float64) {
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
	var x *kernels.Tensor
	var in inputBuf
	defer func() {
		if x != nil {
			be.Free(x)
		}
		in.free(be)
	}()
	for s := 0; s < loader.Steps(0); s++ {
		n := len(loader.Indices(0, s))
		if x == nil || x.Shape[0] != n {
			if x != nil {
				be.Free(x)
			}
			x = be.New(kernels.CatData, dt, n, test.C, data.Side, data.Side)
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
