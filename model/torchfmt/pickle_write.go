package torchfmt

import (
	"encoding/binary"
	"strconv"
)

// pickler emits the protocol-2 pickle torch.save writes for a state dict. It
// memoizes globals (and reuses them with BINGET) like CPython's pickler; other
// objects are not memoized since nothing refers back to them.
type pickler struct {
	buf  []byte
	memo map[string]int
}

// batchSize matches CPython's SETITEMS batching.
const batchSize = 1000

// pickleStateDict returns data.pkl for ts: an OrderedDict of name ->
// torch._utils._rebuild_tensor_v2(storage i, 0, shape, contiguous strides, False,
// OrderedDict()), where storage i is data/i of the archive.
func pickleStateDict(ts []Tensor) []byte {
	p := &pickler{memo: map[string]int{}}
	p.buf = append(p.buf, opProto, 2)
	p.newOrderedDict()
	for start := 0; start < len(ts); start += batchSize {
		p.buf = append(p.buf, opMark)
		for i := start; i < len(ts) && i < start+batchSize; i++ {
			p.str(ts[i].Name)
			p.tensor(ts[i], i)
		}
		p.buf = append(p.buf, opSetItems)
	}
	return append(p.buf, opStop)
}

func (p *pickler) newOrderedDict() {
	p.global("collections", "OrderedDict")
	p.buf = append(p.buf, opEmptyTuple, opReduce)
}

// tensor pickles one tensor the way Tensor.__reduce_ex__ does.
func (p *pickler) tensor(t Tensor, storage int) {
	p.global("torch._utils", "_rebuild_tensor_v2")
	p.buf = append(p.buf, opMark)
	// Persistent id: ('storage', torch.XStorage, key, location, numel).
	p.buf = append(p.buf, opMark)
	p.str("storage")
	p.global("torch", storageClass[t.DType])
	p.str(strconv.Itoa(storage))
	p.str("cpu")
	p.int(int64(t.Numel()))
	p.buf = append(p.buf, opTuple, opBinPersID)
	p.int(0) // storage offset
	p.intTuple(t.Shape)
	p.intTuple(contiguousStrides(t.Shape))
	p.buf = append(p.buf, opNewFalse) // requires_grad
	p.newOrderedDict()                // backward hooks
	p.buf = append(p.buf, opTuple, opReduce)
}

// global writes GLOBAL the first time and BINGET of its memo slot afterwards.
func (p *pickler) global(module, name string) {
	key := module + "\n" + name + "\n"
	if idx, ok := p.memo[key]; ok {
		p.memoOp(opBinGet, opLongBinGet, idx)
		return
	}
	p.buf = append(p.buf, opGlobal)
	p.buf = append(p.buf, key...)
	idx := len(p.memo)
	p.memo[key] = idx
	p.memoOp(opBinPut, opLongBinPut, idx)
}

func (p *pickler) memoOp(short, long byte, idx int) {
	if idx < 256 {
		p.buf = append(p.buf, short, byte(idx))
		return
	}
	p.buf = append(p.buf, long)
	p.buf = binary.LittleEndian.AppendUint32(p.buf, uint32(idx))
}

func (p *pickler) str(s string) {
	p.buf = append(p.buf, opBinUnicode)
	p.buf = binary.LittleEndian.AppendUint32(p.buf, uint32(len(s)))
	p.buf = append(p.buf, s...)
}

// int uses the shortest encoding CPython would pick.
func (p *pickler) int(v int64) {
	switch {
	case v >= 0 && v < 1<<8:
		p.buf = append(p.buf, opBinInt1, byte(v))
	case v >= 0 && v < 1<<16:
		p.buf = append(p.buf, opBinInt2, byte(v), byte(v>>8))
	case v >= -1<<31 && v < 1<<31:
		p.buf = append(p.buf, opBinInt)
		p.buf = binary.LittleEndian.AppendUint32(p.buf, uint32(v))
	default:
		p.buf = append(p.buf, opLong1, 8)
		p.buf = binary.LittleEndian.AppendUint64(p.buf, uint64(v))
	}
}

func (p *pickler) intTuple(vs []int) {
	if len(vs) == 0 {
		p.buf = append(p.buf, opEmptyTuple)
		return
	}
	if len(vs) > 3 {
		p.buf = append(p.buf, opMark)
	}
	for _, v := range vs {
		p.int(int64(v))
	}
	if len(vs) > 3 {
		p.buf = append(p.buf, opTuple)
		return
	}
	p.buf = append(p.buf, opTuple1+byte(len(vs)-1))
}

// contiguousStrides returns row-major strides in elements, treating empty dims as
// size 1 like torch does.
func contiguousStrides(shape []int) []int {
	st := make([]int, len(shape))
	s := 1
	for i := len(shape) - 1; i >= 0; i-- {
		st[i] = s
		s *= max(shape[i], 1)
	}
	return st
}
