package cuda

import (
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// The structs the Go side uploads (kernel tables) or passes by value
// (cuLaunchKernel copies the bytes) must lay out exactly as the CUDA
// structs they mirror: a field at another offset reads garbage on the GPU
// and nothing on the CPU notices. This test computes each C struct's layout
// from its source (natural alignment, as nvcc does on x86-64) and compares
// it field by field with the Go struct's.
func TestKernelStructLayouts(t *testing.T) {
	for _, c := range []struct {
		file, name string
		goType     any
	}{
		{"ops.cu", "NFEntry", nfEntry{}},
		{"ops.cu", "AdamEntry", adamEntry{}},
		{"ops.cu", "AdamHP", adamHP{}},
		{"ops.cu", "AdamCopyEntry", adamCopyEntry{}},
		{"conv.cu", "ConvShape", convShape{}},
		{"augment.cu", "Crop", cropEntry{}},
	} {
		src := kernelSource(t, c.file)
		cf, csize, err := cStructLayout(src, c.name)
		if err != nil {
			t.Errorf("%s: %v", c.file, err)
			continue
		}
		gt := reflect.TypeOf(c.goType)
		var gf [][2]uintptr
		for i := range gt.NumField() {
			f := gt.Field(i)
			gf = append(gf, [2]uintptr{f.Offset, f.Type.Size()})
		}
		if fmt.Sprint(gf) != fmt.Sprint(cf) || gt.Size() != csize {
			t.Errorf("%s: Go %s fields (offset, size) %v, %d bytes; C %s %v, %d bytes", c.file, gt.Name(), gf, gt.Size(), c.name, cf, csize)
		}
	}
}

// kernelSource reads src/file.
func kernelSource(t *testing.T, file string) string {
	b, err := os.ReadFile("src/" + file)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var lineComment = regexp.MustCompile(`//[^\n]*`)

// cStructLayout returns the (offset, size) of each field of struct name in
// src and the struct's size. It knows the scalar types the kernels' structs
// use; pointers are 8 bytes.
func cStructLayout(src, name string) ([][2]uintptr, uintptr, error) {
	src = lineComment.ReplaceAllString(src, "")
	_, body, ok := strings.Cut(src, "struct "+name+" {")
	if !ok {
		return nil, 0, fmt.Errorf("no struct %s", name)
	}
	body, _, ok = strings.Cut(body, "};")
	if !ok {
		return nil, 0, fmt.Errorf("struct %s is not closed", name)
	}
	var fields [][2]uintptr
	var off, align uintptr = 0, 1
	for _, decl := range strings.Split(body, ";") {
		decl = strings.TrimSpace(decl)
		if decl == "" {
			continue
		}
		typ, names := splitDecl(decl)
		size := map[string]uintptr{"int": 4, "unsigned": 4, "float": 4, "i64": 8, "long long": 8, "ptr": 8}[typ]
		if size == 0 {
			return nil, 0, fmt.Errorf("struct %s: unknown type in %q", name, decl)
		}
		for range names {
			off = (off + size - 1) / size * size
			fields = append(fields, [2]uintptr{off, size})
			off += size
			align = max(align, size)
		}
	}
	return fields, (off + align - 1) / align * align, nil
}

// splitDecl splits "const void* p, q" into its type ("ptr" for pointers,
// qualifiers dropped) and names.
func splitDecl(decl string) (string, []string) {
	ptr := strings.Contains(decl, "*")
	words := strings.Fields(strings.ReplaceAll(decl, "*", " "))
	var typ []string
	i := 0
	for ; i < len(words); i++ {
		w := words[i]
		if w == "const" {
			continue
		}
		if w != "int" && w != "unsigned" && w != "float" && w != "i64" && w != "long" && w != "void" {
			break
		}
		typ = append(typ, w)
	}
	var names []string
	for _, n := range strings.Split(strings.Join(words[i:], " "), ",") {
		names = append(names, strings.TrimSpace(n))
	}
	if ptr {
		return "ptr", names
	}
	return strings.Join(typ, " "), names
}
