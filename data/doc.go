// Package data provides the image data sets resnetlab trains on (CIFAR-10,
// Fashion-MNIST, a seeded synthetic set), the reference train-time
// augmentation (Pad(4) + RandomCrop(32) + RandomHorizontalFlip, to [0,1]) and
// a batch loader with torch DistributedSampler + DataLoader(drop_last)
// semantics.
//
// Every random choice (epoch permutation, crop offsets, flips) is a pure
// function of (seed, epoch, sample index), so a run gives the same batches
// whatever the world size, the batch layout or the epoch it resumed from:
// with world=W and per-rank batch B, the union of the ranks' batch s is
// exactly world=1 batch-(W*B) batch s, each sample augmented identically.
//
// Imports: data imports kernels (the per-image crop and flip it shares with
// the backends' AugmentBatch) and the standard library; never model,
// engines or the runner.
package data
