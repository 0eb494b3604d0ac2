package data

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"resnetlab/fsutil"
	"slices"
	"strings"
)

// SystemFashionMNISTDir is where Debian's dataset-fashion-mnist package
// installs the gzipped idx files.
var SystemFashionMNISTDir = "/usr/share/datasets/fashion-mnist"

// fmnistBase are the idx file names without the optional .gz.
var fmnistBase = struct{ trainImages, trainLabels, testImages, testLabels string }{
	"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
	"t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte",
}

const mnistSide = 28

// FashionMNISTDirs are the folders LoadFashionMNIST searches, in order:
// root, root/fashion-mnist, root/FashionMNIST/raw (torchvision's layout),
// then the Debian package's folder (once: not again when root is it).
func FashionMNISTDirs(root string) []string {
	return fmnistDirs(root, false)
}

// fmnistDirs is FashionMNISTDirs; onlyRoot leaves out the system folder
// as a fallback, but never root itself or a folder under it, even when
// root is the system folder (the user named it).
func fmnistDirs(root string, onlyRoot bool) []string {
	dirs := []string{root, filepath.Join(root, "fashion-mnist"), filepath.Join(root, "FashionMNIST", "raw")}
	if onlyRoot || slices.ContainsFunc(dirs, func(d string) bool { return filepath.Clean(d) == filepath.Clean(SystemFashionMNISTDir) }) {
		return dirs
	}
	return append(dirs, SystemFashionMNISTDir)
}

// LoadFashionMNIST loads Fashion-MNIST from idx files (gzipped or not) in
// the first of FashionMNISTDirs(root) that holds any of its four files: a
// folder the user filled only in part is an error naming what is missing
// there, never a silent fall-through to another copy (the system one). The
// 28x28 images are zero-padded by 2 to 32x32; channels (1 or 3) says whether
// to replicate the grey plane into three. Source names the folder used.
func LoadFashionMNIST(root string, channels int) (train, test *Dataset, err error) {
	return loadFashionMNIST(root, channels, false)
}

// loadFashionMNIST is LoadFashionMNIST; onlyRoot searches only root and
// the folders under it (see fmnistDirs).
func loadFashionMNIST(root string, channels int, onlyRoot bool) (train, test *Dataset, err error) {
	if channels != 1 && channels != 3 {
		return nil, nil, fmt.Errorf("data: fashion-mnist with %d channels, expected 1 or 3", channels)
	}
	dirs := fmnistDirs(root, onlyRoot)
	for _, dir := range dirs {
		missing := missingFMNIST(dir)
		if len(missing) == 4 {
			continue
		}
		if len(missing) > 0 {
			return nil, nil, fmt.Errorf("data: fashion-mnist in %s is incomplete: missing %s (.gz or not); "+
				"add the missing files or remove the others", dir, strings.Join(missing, ", "))
		}
		if train, err = loadFMNISTSplit(dir, fmnistBase.trainImages, fmnistBase.trainLabels, channels); err != nil {
			return nil, nil, err
		}
		if test, err = loadFMNISTSplit(dir, fmnistBase.testImages, fmnistBase.testLabels, channels); err != nil {
			return nil, nil, err
		}
		train.Source, test.Source = dir, dir
		return train, test, nil
	}
	var searched []string
	for _, d := range dirs {
		searched = append(searched, filepath.Join(d, fmnistBase.trainImages+"[.gz]"))
	}
	return nil, nil, &NotFoundError{Dataset: "fashion-mnist", Searched: searched, Hint: fmnistHint(root)}
}

// missingFMNIST lists the Fashion-MNIST files dir lacks.
func missingFMNIST(dir string) []string {
	var missing []string
	for _, b := range []string{fmnistBase.trainImages, fmnistBase.trainLabels, fmnistBase.testImages, fmnistBase.testLabels} {
		if findIdx(dir, b) == "" {
			missing = append(missing, b)
		}
	}
	return missing
}

func fmnistHint(root string) string {
	return fmt.Sprintf("install it with `apt-get install dataset-fashion-mnist` (files go to %s) "+
		"or copy train-/t10k-images-idx3-ubyte and train-/t10k-labels-idx1-ubyte (.gz or not) into %s",
		SystemFashionMNISTDir, root)
}

// findIdx returns the path of base or base.gz in dir, or "" if neither exists.
func findIdx(dir, base string) string {
	for _, name := range []string{base, base + ".gz"} {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

func loadFMNISTSplit(dir, imagesBase, labelsBase string, channels int) (*Dataset, error) {
	imgPath, lblPath := findIdx(dir, imagesBase), findIdx(dir, labelsBase)
	for _, p := range []struct{ path, base string }{{imgPath, imagesBase}, {lblPath, labelsBase}} {
		if p.path == "" {
			return nil, fmt.Errorf("data: fashion-mnist in %s: missing %s (or %s.gz); expected all of %s, %s, %s, %s",
				dir, p.base, p.base, fmnistBase.trainImages, fmnistBase.trainLabels, fmnistBase.testImages, fmnistBase.testLabels)
		}
	}
	images, err := readIdxFile(imgPath)
	if err != nil {
		return nil, err
	}
	labels, err := readIdxFile(lblPath)
	if err != nil {
		return nil, err
	}
	return fmnistDataset(images, labels, imgPath, lblPath, channels)
}

func readIdxFile(path string) (*Idx, error) {
	f, err := fsutil.OpenRegular(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("data: %s missing", path)
		}
		return nil, fmt.Errorf("data: %w", err)
	}
	defer f.Close()
	return ReadIdx(f, path)
}

// fmnistDataset checks that images ([N,28,28]) and labels ([N], < 10) agree
// and builds the padded data set.
func fmnistDataset(images, labels *Idx, imgPath, lblPath string, channels int) (*Dataset, error) {
	if len(images.Dims) != 3 || images.Dims[1] != mnistSide || images.Dims[2] != mnistSide {
		return nil, &FormatError{File: imgPath, Offset: 4, Expected: "image dims [N 28 28]",
			Found: fmt.Sprintf("dims %v", images.Dims)}
	}
	if len(labels.Dims) != 1 {
		return nil, &FormatError{File: lblPath, Offset: 4, Expected: "label dims [N]",
			Found: fmt.Sprintf("dims %v", labels.Dims)}
	}
	n := images.Dims[0]
	if labels.Dims[0] != n {
		return nil, fmt.Errorf("data: %s has %d labels but %s has %d images: expected equal counts",
			lblPath, labels.Dims[0], imgPath, n)
	}
	if i := slices.IndexFunc(labels.Data, func(l uint8) bool { return l >= 10 }); i >= 0 {
		return nil, &FormatError{File: lblPath, Offset: int64(8 + i), Expected: "a label in [0,10)",
			Found: fmt.Sprintf("label %d of sample %d", labels.Data[i], i)}
	}
	ds := &Dataset{Name: "fashion-mnist", N: n, C: channels, Classes: FashionMNISTClasses,
		Images: make([]uint8, n*channels*Plane), Labels: labels.Data}
	for i := 0; i < n; i++ {
		padMNIST(ds.Image(i), images.Data[i*mnistSide*mnistSide:(i+1)*mnistSide*mnistSide], channels)
	}
	return ds, nil
}

// padMNIST writes a 28x28 grey image centred in 32x32 planes (zero border
// of 2), into each of the channels planes of dst (already zero).
func padMNIST(dst, src []uint8, channels int) {
	const off = (Side - mnistSide) / 2
	for y := 0; y < mnistSide; y++ {
		row := src[y*mnistSide : (y+1)*mnistSide]
		for c := 0; c < channels; c++ {
			o := c*Plane + (y+off)*Side + off
			copy(dst[o:o+mnistSide], row)
		}
	}
}
