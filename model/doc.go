// Package model holds ResNet-18 exactly as torchvision builds it (layers with
// parameters and gradients on top of kernels.Backend), its Adam optimizer and
// the MultiStepLR schedule of the reference recipe.
//
// Imports: model imports kernels and the standard library (kernels/cpu in tests).
package model
