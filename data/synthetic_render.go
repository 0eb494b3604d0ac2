package data

import "math"

// sample renders one sample into img, using acc as scratch (fixed point, 1.0 = 256).
func (g *synGen) sample(img []uint8, acc *[3 * Plane]int32, tpl *synTemplate, r *rng) {
	p := &g.p
	sy := synMaxShift - p.shift + r.intn(2*p.shift+1)
	sx := synMaxShift - p.shift + r.intn(2*p.shift+1)
	bright := float64(p.brightMin+r.intn(p.brightMax-p.brightMin+1)) / 256
	m := hueRotation((r.float()*2 - 1) * p.hue)
	var mix [3][3]int32 // colour mix times gain, fixed point 1.0 = 256
	for i := range mix {
		for j := range mix[i] {
			mix[i][j] = int32(math.Round(m[i][j] * bright * 256))
		}
	}
	var bg [3]int32
	for c := range bg {
		bg[c] = int32(60+r.intn(136)) << 8
	}
	for y := 0; y < Side; y++ {
		o := (y+sy)*synCanvas + sx
		t0, t1, t2 := tpl[0][o:o+Side], tpl[1][o:o+Side], tpl[2][o:o+Side]
		for x := 0; x < Side; x++ {
			v0, v1, v2 := int32(t0[x]), int32(t1[x]), int32(t2[x])
			for c := 0; c < 3; c++ {
				acc[c*Plane+y*Side+x] = bg[c] + mix[c][0]*v0 + mix[c][1]*v1 + mix[c][2]*v2
			}
		}
	}
	g.addDistractor(acc, r)
	addNoiseAndStore(img, acc, &g.noise, r)
}

// hueRotation is the rotation by theta about the grey axis (1,1,1)/sqrt(3)
// (Rodrigues' formula): it keeps luminance and rotates hue.
func hueRotation(theta float64) (m [3][3]float64) {
	c, s := math.Cos(theta), math.Sin(theta)
	const k = 1.0 / 3
	sq := s / math.Sqrt(3)
	a, b, d := c+(1-c)*k, (1-c)*k-sq, (1-c)*k+sq
	return [3][3]float64{{a, b, d}, {d, a, b}, {b, d, a}}
}

// addDistractor adds the sprite at a random position with a random colour.
func (g *synGen) addDistractor(acc *[3 * Plane]int32, r *rng) {
	const w = 2*synSpriteHalf + 1
	cy, cx := r.intn(Side), r.intn(Side)
	for c := 0; c < 3; c++ {
		amp := int32(r.intn(2*g.p.distract+1) - g.p.distract)
		for y := max(0, cy-synSpriteHalf); y < min(Side, cy+synSpriteHalf+1); y++ {
			for x := max(0, cx-synSpriteHalf); x < min(Side, cx+synSpriteHalf+1); x++ {
				acc[c*Plane+y*Side+x] += amp * int32(g.sprite[(y-cy+synSpriteHalf)*w+x-cx+synSpriteHalf])
			}
		}
	}
}

// addNoiseAndStore adds noise looked up by one random byte per pixel
// (eight pixels per 64-bit draw) and clamps to bytes.
func addNoiseAndStore(img []uint8, acc *[3 * Plane]int32, noise *[256]int32, r *rng) {
	for i := 0; i < len(acc); i += 8 {
		bits := r.next()
		for k := 0; k < 8; k++ {
			v := (acc[i+k] >> 8) + noise[uint8(bits>>(8*k))]
			img[i+k] = uint8(max(0, min(255, v)))
		}
	}
}

// triangularTable maps a uniform byte to triangular noise on [-amp, amp]
// (the distribution of the sum of two uniforms) by its inverse CDF.
func triangularTable(amp int32) (t [256]int32) {
	for i := range t {
		u := (float64(i) + 0.5) / 256
		var z float64 // in [-1, 1]
		if u < 0.5 {
			z = math.Sqrt(2*u) - 1
		} else {
			z = 1 - math.Sqrt(2*(1-u))
		}
		t[i] = int32(math.Round(z * float64(amp)))
	}
	return t
}
