package report

import "resnetlab/spec"

// referenceSource says where ReferenceCIFAR10 comes from.
const referenceSource = "ColossalAI README, ResNet-18 on CIFAR-10, 80 epochs " +
	"(docs/design.md, \"Reference accuracy\")"

// ReferenceCIFAR10 is docs/design.md's "Reference accuracy" table: the final test
// accuracy ColossalAI's README reports for its ResNet-18 example. Plugin
// and precision follow the column names and the plugin table of docs/design.md
// (low_level_zero and gemini compute in fp16); the README gives no GPU
// count except for the single-GPU column, so Ranks is 0 (unknown) there.
var ReferenceCIFAR10 = []struct {
	Column, Plugin, Precision string
	Ranks                     int
	Acc                       float64
}{
	{"single-GPU FP32", spec.PluginTorchDDP, "fp32", 1, 0.8585},
	{"DDP FP32", spec.PluginTorchDDP, "fp32", 0, 0.8491},
	{"DDP FP16", spec.PluginTorchDDPFP16, "fp16", 0, 0.8546},
	{"Low Level ZeRO", spec.PluginLowLevelZero, "fp16", 0, 0.8450},
	{"Gemini", spec.PluginGemini, "fp16", 0, 0.8460},
}

// referenceEpochs is the length of the runs behind ReferenceCIFAR10.
const referenceEpochs = 80

// ReferenceRows are ReferenceCIFAR10 as report rows.
func ReferenceRows() []Row {
	var rows []Row
	for _, r := range ReferenceCIFAR10 {
		rows = append(rows, Row{
			Label: "reference: " + r.Column, Source: SourceReference, Plugin: r.Plugin,
			Precision: r.Precision, Dataset: "cifar10", WorldSize: r.Ranks, EpochsDone: referenceEpochs,
			HasFinal: true, FinalAcc: r.Acc, Status: "published",
		})
	}
	return rows
}
