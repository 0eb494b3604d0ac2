package model

import (
	"math"
	"math/rand/v2"
)

// pcgStream is the second PCG seed word; any constant works, fixing it makes
// identical cfg.Seed values give identical parameters.
const pcgStream = 0x5265734e65743138 // "ResNet18"

// init draws every parameter as torchvision's ResNet.__init__ leaves it:
// convs kaiming_normal_(mode="fan_out", nonlinearity="relu"), BN weight 1
// bias 0 with fresh running statistics, fc as nn.Linear.reset_parameters.
// Parameters are drawn in state-dict order from one PCG stream.
func (m *ResNet) init() {
	rng := rand.New(rand.NewPCG(m.Cfg.Seed, pcgStream))
	for _, l := range m.layers {
		switch l := l.(type) {
		case *Conv2d:
			// fan_out = out_channels * kh * kw; gain sqrt(2) for relu.
			std := math.Sqrt(2 / float64(l.Out*l.K*l.K))
			m.fill(l.Weight, func() float64 { return rng.NormFloat64() * std })
		case *BatchNorm2d:
			l.reset()
		case *Linear:
			// kaiming_uniform_(a=sqrt(5)) gives bound 1/sqrt(fan_in); the
			// bias uses the same bound.
			bound := 1 / math.Sqrt(float64(l.In))
			uni := func() float64 { return (2*rng.Float64() - 1) * bound }
			m.fill(l.Weight, uni)
			m.fill(l.Bias, uni)
		}
	}
}

// fill uploads n draws of gen into p.W and zeroes p.G.
func (m *ResNet) fill(p *Param, gen func() float64) {
	host := make([]float32, p.W.Len())
	for i := range host {
		host[i] = float32(gen())
	}
	m.be.Upload(p.W, host)
	m.be.Fill(p.G, 0)
}
