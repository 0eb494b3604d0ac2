package torchfmt

// Pickle opcodes used by torch.save (protocol 2 by default) and by other protocols
// that users may pass as pickle_protocol. Names follow CPython's pickle.py.
const (
	opMark            = '('
	opStop            = '.'
	opPop             = '0'
	opPopMark         = '1'
	opDup             = '2'
	opInt             = 'I'
	opBinInt          = 'J'
	opBinInt1         = 'K'
	opBinInt2         = 'M'
	opNone            = 'N'
	opBinPersID       = 'Q'
	opReduce          = 'R'
	opBinString       = 'T'
	opShortBinString  = 'U'
	opBinUnicode      = 'X'
	opAppend          = 'a'
	opBuild           = 'b'
	opGlobal          = 'c'
	opDict            = 'd'
	opEmptyDict       = '}'
	opAppends         = 'e'
	opGet             = 'g'
	opBinGet          = 'h'
	opLongBinGet      = 'j'
	opList            = 'l'
	opEmptyList       = ']'
	opPut             = 'p'
	opBinPut          = 'q'
	opLongBinPut      = 'r'
	opSetItem         = 's'
	opTuple           = 't'
	opEmptyTuple      = ')'
	opSetItems        = 'u'
	opBinFloat        = 'G'
	opBinBytes        = 'B'
	opShortBinBytes   = 'C'
	opProto           = 0x80
	opNewObj          = 0x81
	opTuple1          = 0x85
	opTuple2          = 0x86
	opTuple3          = 0x87
	opNewTrue         = 0x88
	opNewFalse        = 0x89
	opLong1           = 0x8a
	opLong4           = 0x8b
	opShortBinUnicode = 0x8c
	opBinUnicode8     = 0x8d
	opBinBytes8       = 0x8e
	opStackGlobal     = 0x93
	opMemoize         = 0x94
	opFrame           = 0x95
)

// The only globals a state-dict pickle may name, as in torch's weights_only
// unpickler (restricted further to what a state dict needs).
const (
	gOrderedDict     = "collections.OrderedDict"
	gRebuildTensorV2 = "torch._utils._rebuild_tensor_v2"
	gRebuildParam    = "torch._utils._rebuild_parameter"
)

// storageDTypes maps torch's legacy typed-storage classes, which torch.save still
// names in each storage's persistent id, to our dtypes.
var storageDTypes = map[string]string{
	"torch.FloatStorage":    F32,
	"torch.HalfStorage":     F16,
	"torch.BFloat16Storage": BF16,
	"torch.LongStorage":     I64,
}

// storageClass is the inverse of storageDTypes, for writing.
var storageClass = map[string]string{
	F32:  "FloatStorage",
	F16:  "HalfStorage",
	BF16: "BFloat16Storage",
	I64:  "LongStorage",
}

func allowedGlobal(full string) bool {
	switch full {
	case gOrderedDict, gRebuildTensorV2, gRebuildParam:
		return true
	}
	_, ok := storageDTypes[full]
	return ok
}
