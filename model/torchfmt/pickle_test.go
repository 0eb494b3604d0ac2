package torchfmt

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
)

// canon renders an unpickled value like testdata/gen_pickles.py renders the Python
// original (acyclic test data only).
func canon(v any) string {
	switch v := v.(type) {
	case nil:
		return "None"
	case bool:
		if v {
			return "True"
		}
		return "False"
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return "f:" + hex.EncodeToString(binary.BigEndian.AppendUint64(nil, math.Float64bits(v)))
	case string:
		return "s:" + hex.EncodeToString([]byte(v))
	case []byte:
		return "b:" + hex.EncodeToString(v)
	case pyTuple:
		return "(" + canonItems(v) + ")"
	case *pyList:
		return "[" + canonItems(v.items) + "]"
	case *pyDict:
		var b strings.Builder
		for i := range v.keys {
			b.WriteString(canon(v.keys[i]) + ":" + canon(v.vals[i]) + ",")
		}
		return "{" + b.String() + "}"
	}
	return "?" + typeName(v)
}

func canonItems(items []any) string {
	var b strings.Builder
	for _, x := range items {
		b.WriteString(canon(x) + ",")
	}
	return b.String()
}

// TestUnpickleCPythonOutput runs pickles written by CPython (protocols 2-5) and
// compares with the values CPython says they hold.
func TestUnpickleCPythonOutput(t *testing.T) {
	f, err := os.Open("testdata/pickles.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	n := 0
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 4 {
			t.Fatalf("bad line in pickles.txt: %.80s", sc.Text())
		}
		data, err := hex.DecodeString(fields[2])
		if err != nil {
			t.Fatal(err)
		}
		v, err := unpickle(data, nil)
		if err != nil {
			t.Errorf("%s protocol %s: %v", fields[0], fields[1], err)
			continue
		}
		if got := canon(v); got != fields[3] {
			t.Errorf("%s protocol %s:\n got %.200s\nwant %.200s", fields[0], fields[1], got, fields[3])
		}
		n++
	}
	if n < 30 {
		t.Fatalf("only %d pickles checked", n)
	}
}

// TestUnpickleSharedReferences checks that memo GETs return the same object, as
// Python does (a list appended to after being shared shows up in both places).
func TestUnpickleSharedReferences(t *testing.T) {
	// [L, L] where L = [] gets 7 appended after the second reference.
	data := []byte{opProto, 2, opEmptyList, opBinPut, 0, opMark, opEmptyList, opBinPut, 1,
		opBinGet, 1, opAppends, opBinGet, 1, opBinInt1, 7, opAppend, opPop, opStop}
	v, err := unpickle(data, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := canon(v); got != "[[7,],[7,],]" {
		t.Fatalf("got %s", got)
	}
}

func TestUnpickleRejects(t *testing.T) {
	cases := []struct {
		name, want string
		data       string
	}{
		{"os.system", "global os.system is not allowed", "\x80\x02cos\nsystem\nX\x02\x00\x00\x00hi\x85R."},
		{"builtins eval via STACK_GLOBAL", "global builtins.eval is not allowed", "\x80\x04\x8c\x08builtins\x8c\x04eval\x93."},
		{"class instance", "global __main__.X is not allowed", "\x80\x02c__main__\nX\n)\x81."},
		{"NEWOBJ", "NEWOBJ", "\x80\x02ccollections\nOrderedDict\n)\x81."},
		{"call storage class", "cannot call torch.FloatStorage", "\x80\x02ctorch\nFloatStorage\n)R."},
		{"OrderedDict with args", "collections.OrderedDict called with 1 arguments", "\x80\x02ccollections\nOrderedDict\nK\x01\x85R."},
		{"BUILD on list", "BUILD is only allowed on an OrderedDict", "\x80\x02]}b."},
		{"set opcode", "not supported", "\x80\x04\x8f."},
		{"no STOP", "no STOP", "\x80\x02K\x01"},
		{"two objects at STOP", "with 2 objects", "\x80\x02K\x01K\x02."},
		{"underflow", "stack underflow", "\x80\x02\x85."},
		{"pop below mark", "stack underflow", "\x80\x02K\x01(0."},
		{"no mark", "no MARK", "\x80\x02t."},
		{"empty memo", "memo slot 3 is empty", "\x80\x02h\x03."},
		{"truncated string", "runs past the end", "\x80\x02X\xff\x00\x00\x00ab."},
		{"huge int", "does not fit in int64", "\x80\x02\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01."},
		{"persistent id without storages", "no storages", "\x80\x02K\x01\x85Q."},
		{"unhashable key", "dict key of type list not supported", "\x80\x02}]K\x01s."},
		{"append to dict", "can only append to a list", "\x80\x02}K\x01a."},
	}
	for _, c := range cases {
		_, err := unpickle([]byte(c.data), nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}

// TestUnpickleCycleErrorDoesNotHang builds a list containing itself and then makes
// it fail; error messages must not try to print the value.
func TestUnpickleCycleErrorDoesNotHang(t *testing.T) {
	data := "\x80\x02]q\x00h\x00ah\x00b."
	_, err := unpickle([]byte(data), nil)
	if err == nil || !strings.Contains(err.Error(), "BUILD is only allowed on an OrderedDict, not list") {
		t.Fatalf("error %v", err)
	}
}
