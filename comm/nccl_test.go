package comm

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNCCLCandidates(t *testing.T) {
	t.Setenv("LD_LIBRARY_PATH", "/opt/a::/opt/b")
	got := strings.Join(ncclCandidates(), ",")
	want := "/usr/lib/x86_64-linux-gnu/libnccl.so.2,/opt/a/libnccl.so.2,/opt/b/libnccl.so.2,libnccl.so.2"
	if got != want {
		t.Fatalf("candidates %s, want %s", got, want)
	}
}

func TestLoadNCCLMissing(t *testing.T) {
	if l, err := LoadNCCL(); err == nil {
		t.Skipf("NCCL is installed here (%s)", l.Path)
	}
	dir := t.TempDir()
	t.Setenv("LD_LIBRARY_PATH", dir)
	t.Setenv("NCCL_NVLS_ENABLE", "1")
	_, err := loadNCCL()
	if err == nil {
		t.Fatal("loadNCCL succeeded on a machine without NCCL")
	}
	for _, want := range []string{"libnccl.so.2", "/usr/lib/x86_64-linux-gnu/libnccl.so.2", filepath.Join(dir, "libnccl.so.2")} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
	if v := os.Getenv("NCCL_NVLS_ENABLE"); v != "0" {
		t.Errorf("NCCL_NVLS_ENABLE=%q after loading, want 0", v)
	}
}

// A library by the right name that is not NCCL must be refused by symbol.
func TestLoadNCCLWrongLibrary(t *testing.T) {
	if _, err := os.Stat("/usr/lib/x86_64-linux-gnu/libnccl.so.2"); err == nil {
		t.Skip("the real NCCL comes first here")
	}
	const libc = "/lib/x86_64-linux-gnu/libc.so.6"
	if _, err := os.Stat(libc); err != nil {
		t.Skip("no libc at ", libc)
	}
	dir := t.TempDir()
	if err := os.Symlink(libc, filepath.Join(dir, "libnccl.so.2")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("LD_LIBRARY_PATH", dir)
	_, err := loadNCCL()
	if err == nil || !strings.Contains(err.Error(), "missing symbol ncclGetVersion") {
		t.Fatalf("loading libc as NCCL: %v", err)
	}
}

func TestNCCLErrorText(t *testing.T) {
	var err error = &NCCLError{Func: "ncclAllReduce", Result: 4, Msg: "invalid argument"}
	var ne *NCCLError
	if !errors.As(err, &ne) || err.Error() != "nccl: ncclAllReduce failed: ncclInvalidArgument (4): invalid argument" {
		t.Fatalf("got %q", err)
	}
	if s := NCCLResult(42).String(); s != "ncclResult(42)" {
		t.Fatalf("unknown result prints %q", s)
	}
}

func TestUniqueIDFromBytes(t *testing.T) {
	var want UniqueID
	for i := range want {
		want[i] = byte(i * 7)
	}
	if got, err := UniqueIDFromBytes(want[:]); err != nil || got != want {
		t.Fatalf("round trip: %v", err)
	}
	if _, err := UniqueIDFromBytes(make([]byte, 127)); err == nil || !strings.Contains(err.Error(), "127 bytes") {
		t.Fatalf("short id: %v", err)
	}
}
