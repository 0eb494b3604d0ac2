package kernels

// Graph is a recorded sequence of a backend's ops that Launch replays
// (a CUDA graph). Everything the ops were given is frozen at capture: the
// tensors' storage and every scalar argument.
type Graph interface {
	Launch() error
	Destroy()
}

// Capturer is the optional interface of backends that can record ops into
// a Graph instead of running them. Between BeginCapture and EndCapture the
// ops are not run, and Upload, Download, NonFinite and Sync panic: the
// captured region must not need the host. Tensors the graph touches must
// stay allocated until Destroy.
type Capturer interface {
	BeginCapture() error
	EndCapture() (Graph, error)
}
