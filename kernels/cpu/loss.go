package cpu

import (
	"fmt"
	"math"

	"resnetlab/kernels"
)

// SoftmaxCrossEntropy computes loss[0] = mean over the batch of
// logsumexp(z) - z[label], and dlogits = (softmax(z) - onehot) * scale / N
// unless dlogits is nil. Each row is computed in float64 with the max
// subtracted (stable); the batch mean sums rows in order.
func (b *Backend) SoftmaxCrossEntropy(loss, dlogits, logits, labels *kernels.Tensor, scale float32) {
	const op = "SoftmaxCrossEntropy"
	b.check(loss, op+" loss")
	b.check(logits, op+" logits")
	b.check(labels, op+" labels")
	if len(logits.Shape) != 2 {
		panic(fmt.Sprintf("cpu: %s: logits have shape %v (want [N,classes])", op, logits.Shape))
	}
	n, k := logits.Shape[0], logits.Shape[1]
	wantShape(op, "labels", labels, n)
	if loss.Len() != 1 {
		panic(fmt.Sprintf("cpu: %s: loss %v must hold 1 element", op, loss))
	}
	if dlogits != nil {
		b.check(dlogits, op+" dlogits")
		wantShape(op, "dlogits", dlogits, n, k)
	}
	var total float64
	g := float64(scale) / float64(n)
	for i := range n {
		z := logits.Host[i*k : (i+1)*k]
		lab := labels.Host[i]
		c := int(lab)
		if float32(c) != lab || c < 0 || c >= k {
			panic(fmt.Sprintf("cpu: %s: label %v of sample %d is not a class index in [0,%d)", op, lab, i, k))
		}
		m := math.Inf(-1)
		for _, v := range z {
			m = math.Max(m, float64(v))
		}
		var s float64
		for _, v := range z {
			s += math.Exp(float64(v) - m)
		}
		lse := m + math.Log(s)
		total += lse - float64(z[c])
		if dlogits == nil {
			continue
		}
		d := dlogits.Host[i*k : (i+1)*k]
		for j, v := range z {
			p := math.Exp(float64(v) - lse)
			if j == c {
				p--
			}
			d[j] = float32(p * g)
		}
	}
	loss.Host[0] = roundTo(loss.DType, float32(total/float64(n)))
	if dlogits != nil {
		b.round(dlogits)
	}
}
