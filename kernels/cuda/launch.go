package cuda

import (
	"embed"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
)

//go:embed ptx/*.ptx
var embeddedPTX embed.FS

// modules are the loaded PTX modules and the kernels looked up so far.
type modules struct {
	handles []uintptr
	names   []string
	funcs   map[string]uintptr
}

// loadModules JIT-loads every PTX file, from $RESNETLAB_PTX_DIR when set
// (the development loop: fresh PTX from gen.sh without rebuilding) or else
// the copies embedded at build time.
func loadModules() (*modules, error) {
	var fsys fs.FS = embeddedPTX
	dir := "ptx"
	if d := os.Getenv("RESNETLAB_PTX_DIR"); d != "" {
		fsys, dir = os.DirFS(d), "."
	}
	files, err := fs.Glob(fsys, filepath.Join(dir, "*.ptx"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("cuda: no PTX files in %s (RESNETLAB_PTX_DIR=%q): %v", dir, os.Getenv("RESNETLAB_PTX_DIR"), err)
	}
	sort.Strings(files)
	m := &modules{funcs: map[string]uintptr{}}
	for _, f := range files {
		src, err := fs.ReadFile(fsys, f)
		if err != nil {
			return m, fmt.Errorf("cuda: reading %s: %v", f, err)
		}
		image := append(src, 0) // cuModuleLoadData wants a NUL-terminated image
		var h uintptr
		if err := call("cuModuleLoadData("+f+")", drv.cuModuleLoadData, uintptr(unsafe.Pointer(&h)), uintptr(unsafe.Pointer(&image[0]))); err != nil {
			return m, err
		}
		m.handles = append(m.handles, h)
		m.names = append(m.names, f)
	}
	return m, nil
}

// fn returns the kernel called name, searching every module once.
func (m *modules) fn(name string) uintptr {
	if f, ok := m.lookup(name); ok {
		return f
	}
	panic(fmt.Sprintf("cuda: kernel %q is in none of the PTX modules %s", name, strings.Join(m.names, ", ")))
}

// has reports whether some module defines kernel name.
func (m *modules) has(name string) bool {
	_, ok := m.lookup(name)
	return ok
}

// require returns an error naming the first of names that no module
// defines (a PTX set generated from older sources, via RESNETLAB_PTX_DIR).
func (m *modules) require(names []string) error {
	for _, n := range names {
		if !m.has(n) {
			return fmt.Errorf("cuda: kernel %q is in none of the PTX modules %s (regenerate them with kernels/cuda/gen.sh)",
				n, strings.Join(m.names, ", "))
		}
	}
	return nil
}

// lookup is fn without the panic.
func (m *modules) lookup(name string) (uintptr, bool) {
	if f, ok := m.funcs[name]; ok {
		return f, true
	}
	cname := append([]byte(name), 0)
	for _, h := range m.handles {
		var f uintptr
		if call("cuModuleGetFunction", drv.cuModuleGetFunction, uintptr(unsafe.Pointer(&f)), h, uintptr(unsafe.Pointer(&cname[0]))) == nil {
			m.funcs[name] = f
			return f, true
		}
	}
	return 0, false
}

func (m *modules) unload() {
	for _, h := range m.handles {
		_ = call("cuModuleUnload", drv.cuModuleUnload, h)
	}
	m.handles = nil
}

// argBuf stages kernel arguments in pinned host memory: slots of pointers
// to values, as cuLaunchKernel's kernelParams wants, followed by the values.
// cuLaunchKernel copies the values at launch, so one buffer serves every
// launch. Keeping it outside the Go heap keeps Go pointers out of C.
type argBuf struct {
	base unsafe.Pointer
	n    int // arguments staged
	off  int // next free value byte
}

const (
	argSlots    = 32
	argBufBytes = 4096
)

func (a *argBuf) init() error {
	return call("cuMemAllocHost_v2(kernel args)", drv.cuMemAllocHost, uintptr(unsafe.Pointer(&a.base)), argBufBytes)
}

func (a *argBuf) free() {
	if a.base != nil {
		_ = call("cuMemFreeHost", drv.cuMemFreeHost, uintptr(a.base))
		a.base = nil
	}
}

// reset starts a new argument list.
func (a *argBuf) reset() *argBuf {
	a.n, a.off = 0, argSlots*8
	return a
}

// slot reserves size bytes (8-aligned) for the next argument.
func (a *argBuf) slot(size int) unsafe.Pointer {
	if a.n == argSlots || a.off+size > argBufBytes {
		panic("cuda: too many kernel arguments")
	}
	p := unsafe.Add(a.base, a.off)
	*(*unsafe.Pointer)(unsafe.Add(a.base, a.n*8)) = p
	a.n++
	a.off += (size + 7) &^ 7
	return p
}

func (a *argBuf) ptr(v uintptr) *argBuf { *(*uintptr)(a.slot(8)) = v; return a }
func (a *argBuf) i32(v int) *argBuf {
	if v > math.MaxInt32 || v < math.MinInt32 {
		panic(fmt.Sprintf("cuda: kernel argument %d does not fit in int32", v))
	}
	*(*int32)(a.slot(4)) = int32(v)
	return a
}
func (a *argBuf) i64(v int) *argBuf     { *(*int64)(a.slot(8)) = int64(v); return a }
func (a *argBuf) f32(v float32) *argBuf { *(*float32)(a.slot(4)) = v; return a }

// raw stages a plain-data struct (no pointers) by value.
func raw[T any](a *argBuf, v *T) *argBuf {
	*(*T)(a.slot(int(unsafe.Sizeof(*v)))) = *v
	return a
}

// launch runs kernel name on grid x block with the staged arguments.
func (b *Backend) launch(name string, gx, gy, gz, block int) {
	b.launchOn(b.stream, name, gx, gy, gz, block)
}

// launchOn is launch on the given stream (the copy stream's conversions).
func (b *Backend) launchOn(stream uintptr, name string, gx, gy, gz, block int) {
	if gx <= 0 || gy <= 0 || gz <= 0 {
		panic(fmt.Sprintf("cuda: %s launched on an empty grid (%d,%d,%d)", name, gx, gy, gz))
	}
	b.cnt.Launches++
	// SyscallN directly: the error text is built only on failure.
	r, _, _ := purego.SyscallN(drv.cuLaunchKernel, b.mod.fn(name),
		uintptr(gx), uintptr(gy), uintptr(gz), uintptr(block), 1, 1, 0, stream, uintptr(b.args.base), 0)
	if r != 0 {
		panic(&Error{Call: fmt.Sprintf("cuLaunchKernel(%s, grid %d,%d,%d, block %d)", name, gx, gy, gz, block), Code: int(r), Name: errorName(r)})
	}
}

// gridFor sizes a grid-stride launch of n elements at 256 threads a block.
func (b *Backend) gridFor(n int) int {
	g := (n + 1023) / 1024 // about four elements per thread
	if max := b.sms * 16; g > max {
		g = max
	}
	if g < 1 {
		g = 1
	}
	return g
}
