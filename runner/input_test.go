package runner

import (
	"resnetlab/report"
	"strings"
	"testing"

	"resnetlab/data"
)

// Building batches in the backend from the resident data sets trains the
// same model, bit for bit, as building them on the host: same model file,
// losses and accuracies, for fp32 and fp16 (one rank, two ranks).
func TestDeviceBatchesTrainTheSameModel(t *testing.T) {
	for _, cell := range oneAndTwoRankCells {
		var res [2]*report.Result
		for i, on := range []bool{false, true} {
			s := tinySpec(t, "[[run]]\n"+cell)
			s.DeviceBatches = on
			evs, err := collect(t, s, RunOptions{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			res[i] = finished(t, evs)[0]
			want := map[bool]string{true: "batches built by the cpu backend", false: "batches built on the host (device_batches = false)"}[on]
			if got := inputLog(evs); !strings.HasPrefix(got, want) {
				t.Fatalf("device_batches = %v: input log %q", on, got)
			}
		}
		host, dev := res[0], res[1]
		if host.ModelSHA256 == "" || dev.ModelSHA256 != host.ModelSHA256 {
			t.Fatalf("%s: model %s with device batches, %s with host batches", dev.Run, dev.ModelSHA256, host.ModelSHA256)
		}
		for i, e := range dev.EpochResults {
			if h := host.EpochResults[i]; e.Loss != h.Loss || e.TestAcc != h.TestAcc {
				t.Fatalf("%s epoch %d: device batches %+v, host batches %+v", dev.Run, e.Epoch, e, h)
			}
		}
		// The resident sets are accounted as the rank's data memory.
		train, test := data.Synthetic(120, 50, 3)
		want := int64(len(train.Images) + len(test.Images))
		if d := dev.PeakDeviceBytes[0] - host.PeakDeviceBytes[0]; d != want {
			t.Fatalf("%s: peak memory grew by %d with device batches, want the data sets' %d bytes", dev.Run, d, want)
		}
	}
}

// Gemini with a device budget keeps the data sets off the device.
func TestGeminiBudgetUsesHostBatches(t *testing.T) {
	s := tinySpec(t, "[[run]]\nplugin = \"gemini\"\n[gemini]\ndevice_budget = \"64MiB\"")
	s.Epochs = 1
	evs, err := collect(t, s, RunOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := inputLog(evs); !strings.Contains(got, "on the host: gemini's device_budget") {
		t.Fatalf("input log %q, want host batches because of the budget", got)
	}
}

// inputLog is the log line that says where batches are built.
func inputLog(evs []Event) string {
	for _, e := range evs {
		if l, ok := e.(Log); ok && strings.HasPrefix(l.Text, "batches built") {
			return l.Text
		}
	}
	return ""
}
