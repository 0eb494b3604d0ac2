package ckpt

import (
	"math"

	"resnetlab/report"
)

// A checkpoint carries the run's per-epoch results so far (in the
// lr_scheduler file's metadata, key "history"), so a run resumed in a new
// process still reports its whole accuracy curve. JSON has no NaN: an epoch
// without evaluation stores test_acc as null.

func historyMeta(es []report.EpochResult) []any {
	out := make([]any, len(es))
	for i, e := range es {
		var acc any
		if !math.IsNaN(e.TestAcc) {
			acc = e.TestAcc
		}
		out[i] = map[string]any{"epoch": e.Epoch, "loss": e.Loss, "test_acc": acc, "seconds": e.Seconds}
	}
	return out
}

// historyFromMeta reads what historyMeta wrote. A checkpoint without it
// (older, or imported) or with an entry of another shape gives nil: the
// history is a report, never needed to train.
func historyFromMeta(v any) []report.EpochResult {
	list, ok := v.([]any)
	if !ok {
		return nil
	}
	out := make([]report.EpochResult, 0, len(list))
	for _, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			return nil
		}
		epoch, err := MetaInt(m, "epoch")
		loss, okl := m["loss"].(float64)
		secs, oks := m["seconds"].(float64)
		if err != nil || !okl || !oks {
			return nil
		}
		acc := math.NaN()
		if a, ok := m["test_acc"].(float64); ok {
			acc = a
		}
		out = append(out, report.EpochResult{Epoch: epoch, Loss: loss, TestAcc: acc, Seconds: secs})
	}
	return out
}

// partialFromMeta reads the "partial_epoch" entry; anything else gives nil
// (like the history, it is a report, never needed to train).
func partialFromMeta(v any) *PartialEpoch {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	loss, okl := m["loss_sum"].(float64)
	secs, oks := m["seconds"].(float64)
	steps, err := MetaInt(m, "steps")
	if !okl || !oks || err != nil || steps < 0 {
		return nil
	}
	return &PartialEpoch{LossSum: loss, Steps: steps, Seconds: secs}
}
