package data

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fmnistFiles builds fake idx files of n train and m test 28x28 images.
func fmnistFiles(t *testing.T, n, m int, gz bool) (files map[string][]byte, trainImg, trainLbl []byte) {
	files = map[string][]byte{}
	r := rng{42}
	add := func(base string, dims []int, data []byte) {
		b := idxBytes(dims, data)
		if gz {
			files[base+".gz"] = gzipBytes(t, b)
		} else {
			files[base] = b
		}
	}
	for _, split := range []struct {
		img, lbl string
		n        int
	}{{fmnistBase.trainImages, fmnistBase.trainLabels, n}, {fmnistBase.testImages, fmnistBase.testLabels, m}} {
		img := make([]byte, split.n*28*28)
		lbl := make([]byte, split.n)
		for i := range img {
			img[i] = byte(r.next())
		}
		for i := range lbl {
			lbl[i] = byte(r.intn(10))
		}
		add(split.img, []int{split.n, 28, 28}, img)
		add(split.lbl, []int{split.n}, lbl)
		if trainImg == nil {
			trainImg, trainLbl = img, lbl
		}
	}
	return files, trainImg, trainLbl
}

// noSystemDir points the system folder at an empty place for the test.
func noSystemDir(t *testing.T) {
	old := SystemFashionMNISTDir
	SystemFashionMNISTDir = filepath.Join(t.TempDir(), "none")
	t.Cleanup(func() { SystemFashionMNISTDir = old })
}

// systemCopy points the system folder at a fresh one holding files.
func systemCopy(t *testing.T, files map[string][]byte) {
	t.Helper()
	old := SystemFashionMNISTDir
	SystemFashionMNISTDir = t.TempDir()
	t.Cleanup(func() { SystemFashionMNISTDir = old })
	writeFiles(t, SystemFashionMNISTDir, files)
}

func TestLoadFashionMNISTPadding(t *testing.T) {
	noSystemDir(t)
	for _, gz := range []bool{false, true} {
		for _, ch := range []int{1, 3} {
			t.Run(fmt.Sprintf("gz=%v,channels=%d", gz, ch), func(t *testing.T) {
				files, img, lbl := fmnistFiles(t, 5, 3, gz)
				root := t.TempDir()
				writeFiles(t, filepath.Join(root, "fashion-mnist"), files)
				train, test, err := LoadFashionMNIST(root, ch)
				if err != nil {
					t.Fatal(err)
				}
				if train.N != 5 || test.N != 3 || train.C != ch || !bytes.Equal(train.Labels, lbl) {
					t.Fatalf("train N=%d C=%d test N=%d labels %v, want 5 %d 3 %v", train.N, train.C, test.N, train.Labels, ch, lbl)
				}
				checkPadded(t, train, img)
			})
		}
	}
}

// checkPadded compares every pixel with the 28x28 source: inside the
// 2-pixel border it is the source pixel, on it zero, in every channel.
func checkPadded(t *testing.T, ds *Dataset, src []byte) {
	t.Helper()
	for i := 0; i < ds.N; i++ {
		im := ds.Image(i)
		for c := 0; c < ds.C; c++ {
			for y := 0; y < 32; y++ {
				for x := 0; x < 32; x++ {
					want := byte(0)
					if y >= 2 && y < 30 && x >= 2 && x < 30 {
						want = src[i*784+(y-2)*28+x-2]
					}
					if got := im[c*1024+y*32+x]; got != want {
						t.Fatalf("image %d c%d (%d,%d) = %d, want %d", i, c, y, x, got, want)
					}
				}
			}
		}
	}
}

func TestLoadFashionMNISTErrors(t *testing.T) {
	noSystemDir(t)
	good, _, _ := fmnistFiles(t, 4, 2, false)
	load := func(t *testing.T, change map[string][]byte) (string, error) {
		root := t.TempDir()
		writeFiles(t, root, mergeFiles(good, change))
		_, _, err := LoadFashionMNIST(root, 1)
		return root, err
	}
	tl, ti := fmnistBase.trainLabels, fmnistBase.trainImages
	t.Run("count mismatch", func(t *testing.T) {
		_, err := load(t, map[string][]byte{tl: idxBytes([]int{3}, []byte{1, 2, 3})})
		wantErr(t, err, tl, ti, "3 labels", "4 images")
	})
	t.Run("label out of range", func(t *testing.T) {
		_, err := load(t, map[string][]byte{tl: idxBytes([]int{4}, []byte{1, 2, 11, 3})})
		wantFormatErr(t, err, 10, tl, "label 11 of sample 2")
	})
	t.Run("wrong image dims", func(t *testing.T) {
		_, err := load(t, map[string][]byte{ti: idxBytes([]int{4, 27, 28}, make([]byte, 4*27*28))})
		wantFormatErr(t, err, 4, ti, "[N 28 28]", "[4 27 28]")
	})
	t.Run("missing labels", func(t *testing.T) {
		root := t.TempDir()
		files := mergeFiles(good, nil)
		delete(files, fmnistBase.testLabels)
		writeFiles(t, root, files)
		_, _, err := LoadFashionMNIST(root, 3)
		wantErr(t, err, root, "missing "+fmnistBase.testLabels)
	})
	t.Run("nothing there", func(t *testing.T) {
		root := t.TempDir()
		_, _, err := LoadFashionMNIST(root, 1)
		wantErr(t, err, "apt-get install dataset-fashion-mnist", filepath.Join(root, "FashionMNIST", "raw"), SystemFashionMNISTDir)
	})
	t.Run("bad channels", func(t *testing.T) {
		_, _, err := LoadFashionMNIST(t.TempDir(), 2)
		wantErr(t, err, "2 channels", "1 or 3")
	})
}

// TestLoadFashionMNISTReal loads the Debian package's files when installed.
func TestLoadFashionMNISTReal(t *testing.T) {
	if _, err := os.Stat(SystemFashionMNISTDir); err != nil {
		t.Skipf("%s not present (apt-get install dataset-fashion-mnist to run this test)", SystemFashionMNISTDir)
	}
	if testing.Short() {
		t.Skip("-short: skipping the 60k-image load")
	}
	train, test, err := LoadFashionMNIST(t.TempDir(), 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ds       *Dataset
		n, class int
	}{{train, 60000, 6000}, {test, 10000, 1000}} {
		if c.ds.N != c.n {
			t.Fatalf("%d samples, want %d", c.ds.N, c.n)
		}
		if h := c.ds.Histogram(); slices.Min(h) != c.class || slices.Max(h) != c.class {
			t.Fatalf("label histogram %v, want %d per class", h, c.class)
		}
		if err := c.ds.Validate(); err != nil {
			t.Fatal(err)
		}
	}
	// The padding border must be zero and the images not blank.
	var border, inside int
	for i := 0; i < 100; i++ {
		im := train.Image(i)
		for x := 0; x < 32; x++ {
			border += int(im[x]) + int(im[31*32+x]) + int(im[x*32]) + int(im[x*32+31])
		}
		inside += int(im[16*32+16])
	}
	if border != 0 || inside == 0 {
		t.Fatalf("border sum %d (want 0), centre sum %d (want > 0)", border, inside)
	}
}

// A folder holding only the test files is the user's choice: the load
// names what is missing there instead of training on the system copy, and
// a complete folder is named as the source.
func TestLoadFashionMNISTPartialRootNotSystem(t *testing.T) {
	files, _, _ := fmnistFiles(t, 4, 2, false)
	systemCopy(t, files)
	root := t.TempDir()
	testOnly := mergeFiles(files, nil)
	delete(testOnly, fmnistBase.trainImages)
	delete(testOnly, fmnistBase.trainLabels)
	writeFiles(t, root, testOnly)
	_, _, err := LoadFashionMNIST(root, 1)
	wantErr(t, err, root, "missing "+fmnistBase.trainImages+", "+fmnistBase.trainLabels)
	full := t.TempDir()
	writeFiles(t, full, files)
	train, test, err := LoadFashionMNIST(full, 1)
	if err != nil || train.Source != full || test.Source != full {
		t.Fatalf("source %q (%v), want %s", train.Source, err, full)
	}
}

// OnlyRoot (a data_dir the spec names) never falls back to the system copy.
func TestLoadFashionMNISTOnlyRoot(t *testing.T) {
	files, _, _ := fmnistFiles(t, 4, 2, false)
	systemCopy(t, files)
	root := t.TempDir()
	if train, _, err := Load("fashion-mnist", root, Channels(1)); err != nil || train.Source != SystemFashionMNISTDir {
		t.Fatalf("default root: source %v (%v), want the system copy", train, err)
	}
	_, _, err := Load("fashion-mnist", root, Channels(1), OnlyRoot())
	var nf *NotFoundError
	if !errors.As(err, &nf) || strings.Contains(strings.Join(nf.Searched, " "), SystemFashionMNISTDir) {
		t.Fatalf("only root: %v, want not found without the system folder searched", err)
	}
}

// The system folder named as the data folder (run --data
// /usr/share/datasets/fashion-mnist) is the user's choice, searched like
// any other named folder: OnlyRoot drops the system copy as a fallback,
// never the folder the user named.
func TestLoadFashionMNISTOnlyRootIsSystemDir(t *testing.T) {
	files, _, _ := fmnistFiles(t, 4, 2, true)
	systemCopy(t, files)
	for _, root := range []string{SystemFashionMNISTDir, SystemFashionMNISTDir + "/"} {
		train, test, err := Load("fashion-mnist", root, Channels(1), OnlyRoot())
		if err != nil || train.Source != root || test.Source != root || train.N != 4 || test.N != 2 {
			t.Fatalf("root %s: %v (%v), want the 4/2 images from it", root, train, err)
		}
	}
	if dirs := FashionMNISTDirs(SystemFashionMNISTDir); len(dirs) != 3 {
		t.Fatalf("search list %v names the system folder twice", dirs)
	}
	// A named system folder that lacks the data is not found, and names it.
	empty := t.TempDir()
	old := SystemFashionMNISTDir
	SystemFashionMNISTDir = empty
	t.Cleanup(func() { SystemFashionMNISTDir = old })
	_, _, err := Load("fashion-mnist", empty, Channels(1), OnlyRoot())
	var nf *NotFoundError
	if !errors.As(err, &nf) || len(nf.Searched) != 3 || !strings.Contains(nf.Searched[0], empty) {
		t.Fatalf("empty named system folder: %v, want not found searching %s", err, empty)
	}
}
