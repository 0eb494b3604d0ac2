package torchfmt

import "strconv"

// TorchvisionResNet18Keys returns the 122 state-dict keys of torchvision's
// resnet18(num_classes=10) in state_dict() order: each module's own parameters, then
// its buffers, then its children in registration order (conv1, bn1, layer1..layer4,
// fc; inside a BasicBlock conv1, bn1, conv2, bn2, downsample).
func TorchvisionResNet18Keys() []string {
	keys := []string{"conv1.weight"}
	keys = append(keys, bnKeys("bn1")...)
	for layer := 1; layer <= 4; layer++ {
		for block := 0; block < 2; block++ {
			p := "layer" + strconv.Itoa(layer) + "." + strconv.Itoa(block) + "."
			keys = append(keys, p+"conv1.weight")
			keys = append(keys, bnKeys(p+"bn1")...)
			keys = append(keys, p+"conv2.weight")
			keys = append(keys, bnKeys(p+"bn2")...)
			if layer > 1 && block == 0 { // stride-2 stages project the shortcut
				keys = append(keys, p+"downsample.0.weight")
				keys = append(keys, bnKeys(p+"downsample.1")...)
			}
		}
	}
	return append(keys, "fc.weight", "fc.bias")
}

// bnKeys lists a BatchNorm2d's parameters then buffers.
func bnKeys(prefix string) []string {
	return []string{prefix + ".weight", prefix + ".bias", prefix + ".running_mean",
		prefix + ".running_var", prefix + ".num_batches_tracked"}
}
