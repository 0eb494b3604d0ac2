package engine

import (
	"resnetlab/kernels"
)

func closeIfCloser(be kernels.Backend) {
	if c, ok := be.(interface{ Close() }); ok {
		c.Close()
	}
}
