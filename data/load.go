package data

import (
	"fmt"
	"strings"
)

// Names are the data sets Load knows, by their canonical names.
var Names = []string{"cifar10", "fashion-mnist", "synthetic"}

// Option adjusts Load.
type Option func(*loadConfig)

type loadConfig struct {
	onlyRoot    bool
	channels    int
	train, test int
	seed        uint64
}

// OnlyRoot searches only under root (the folder the user named), never
// the system copy of a data set.
func OnlyRoot() Option { return func(l *loadConfig) { l.onlyRoot = true } }

// Channels sets Fashion-MNIST's channel count: 1, or 3 (the default, grey
// replicated so the same 3-channel ResNet-18 runs on it).
func Channels(c int) Option { return func(l *loadConfig) { l.channels = c } }

// SyntheticSize sets the synthetic set's sizes (default 50000 / 10000, like CIFAR-10).
func SyntheticSize(train, test int) Option {
	return func(l *loadConfig) { l.train, l.test = train, test }
}

// Seed sets the synthetic set's seed (default 0).
func Seed(s uint64) Option { return func(l *loadConfig) { l.seed = s } }

// Canonical maps a data set name or alias ("cifar-10", "fmnist",
// "fashion_mnist", any case) to its canonical name.
func Canonical(name string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "cifar10", "cifar-10", "cifar_10":
		return "cifar10", nil
	case "fashion-mnist", "fashion_mnist", "fashionmnist", "fmnist":
		return "fashion-mnist", nil
	case "synthetic", "synth":
		return "synthetic", nil
	}
	return "", fmt.Errorf("data: unknown data set %q, expected one of %s", name, strings.Join(Names, ", "))
}

// Load returns the train and test split of the named data set (see Names)
// from root (see Root); the synthetic set ignores root.
func Load(name, root string, opts ...Option) (train, test *Dataset, err error) {
	cfg := loadConfig{channels: 3, train: 50000, test: 10000}
	for _, o := range opts {
		o(&cfg)
	}
	canon, err := Canonical(name)
	if err != nil {
		return nil, nil, err
	}
	switch canon {
	case "cifar10":
		return LoadCIFAR10(root)
	case "fashion-mnist":
		return loadFashionMNIST(root, cfg.channels, cfg.onlyRoot)
	}
	if cfg.train < 0 || cfg.test < 0 {
		return nil, nil, fmt.Errorf("data: synthetic sizes %d/%d, expected >= 0", cfg.train, cfg.test)
	}
	train, test = Synthetic(cfg.train, cfg.test, cfg.seed)
	return train, test, nil
}
