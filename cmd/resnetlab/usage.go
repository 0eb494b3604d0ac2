package main

const mainUsage = `resnetlab trains ResNet-18 the way ColossalAI's ResNet example does, with its
plugins torch_ddp, torch_ddp_fp16, low_level_zero and gemini, on CPU or NVIDIA
GPUs, from TOML experiment specs.

Usage:
  resnetlab <command> [flags] [arguments]

Commands:
  run       train every run of an experiment spec (terminal UI, or a plain log)
  launch    train one run of a spec as several processes, one rank each
  eval      measure the test accuracy of a saved checkpoint
  data      fetch data sets
  compare   compare finished runs side by side
  bench     time training steps of ResNet-18 (no input pipeline)
  export    write a checkpoint's model as a PyTorch state dict (.safetensors/.pth)
  import    turn a torchvision resnet18 state dict into a checkpoint
  report    write a Markdown table and an accuracy plot of finished runs
  help      show the help of a command
  version   say which build this is (also --version)

Examples:
  resnetlab run experiments/zero.toml
  resnetlab run --headless experiments/smoke.toml
  resnetlab eval -c ./checkpoint/zero/gemini-fp16-1 -e 80
  resnetlab compare results/*.json

Run 'resnetlab help <command>' or 'resnetlab <command> --help' for details.
`

const versionUsage = `Usage: resnetlab version   (or resnetlab --version)

Prints which build this is: the module version, the commit and its time
where the build recorded them (go build in a git checkout does, unless
-buildvcs=false), uncommitted changes, and the Go version.

Examples:
  resnetlab version
  resnetlab --version
`

const helpUsage = `Usage: resnetlab help [COMMAND]

Prints the usage of COMMAND, or without one the list of commands. Every
command also takes --help.

Examples:
  resnetlab help
  resnetlab help run
`

const runUsage = `Usage: resnetlab run [--headless] [--resume E|E@S] [--run ID,...] [--device cpu|cuda|auto] [--results DIR] SPEC

Trains every run of the experiment spec SPEC (a TOML file, see experiments/)
and writes each run's result to <results_dir>/<spec>-<run>.json. Invalid grid
cells are listed and skipped. On a terminal it shows the live UI; with
--headless, or when stdout is not a terminal, it prints one line per epoch,
checkpoint and log message, and a table of all runs at the end. Ctrl-C stops.
The exit status is 1 when a run fails, including a final accuracy below the
spec's target_acc.

Flags:
  --headless         plain log output instead of the terminal UI
  --resume E         resume every run from its checkpoint of epoch E's end
  --resume E@S       ... or from its mid-epoch checkpoint S steps into epoch E
                     (c key or Ctrl-C; files model_E-stepS.pth ...)
                     (default: the spec's resume key; 0 there means a fresh start)
  --run ID[,ID...]   train only these runs of the grid (IDs as the runs are
                     named: PLUGIN-PRECISION-GPUS, e.g. gemini-fp16-1); may
                     be repeated (default: every run)
  --device NAME      auto (GPUs when present, else CPU), cpu or cuda
                     (default: the spec's device key)
  --results DIR      write result files to DIR (default: the spec's results_dir)

After an interrupt (Ctrl-C, q) it prints, for every run that did not
finish, the command line that continues it from its checkpoint (or trains
it from the start when it has none).

Examples:
  resnetlab run experiments/zero.toml
  resnetlab run --headless --device cpu experiments/smoke.toml
  resnetlab run --resume 40 experiments/zero.toml
  resnetlab run --resume 41@120 --run gemini-fp16-1 experiments/zero.toml
`

const launchUsage = `Usage: resnetlab launch --nproc-per-node N [--nnodes M --node-rank R] [--master-addr A] [--master-port P] [--resume E[@S]] [--headless] SPEC

Starts this node's N ranks of a world of N x M processes, each as
'resnetlab run --headless SPEC' with RANK, LOCAL_RANK, WORLD_SIZE,
LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR and MASTER_PORT set, as torchrun
does. SPEC must hold one run whose gpus equals N x M; each process uses
device LOCAL_RANK of its host.
Rank 0 serves the rendezvous at A:P, prints the run and writes its
checkpoints and result; the other ranks print only their failure. On a
terminal, node 0's rank 0 runs the terminal UI instead (without --headless):
it shows every rank's memory, and its pause, checkpoint and quit act on
every rank; the launcher holds the other ranks' output until it ends. SIGINT
and SIGTERM are forwarded to every process. When one process fails the
others are ended; the exit status is the first failure's (130 when
interrupted).

Flags:
  --nproc-per-node N  processes (ranks) to start on this node
  --nnodes M          nodes of the world (default 1)
  --node-rank R       this node's index, 0 to M-1 (default 0; node 0 runs rank 0)
  --master-addr A     rank 0's host (default 127.0.0.1)
  --master-port P     rank 0's rendezvous port (default 29500)
  --resume E[@S]      every rank resumes from the checkpoint of epoch E (step S), as run --resume
  --headless          rank 0 prints plain lines even on a terminal

Examples:
  resnetlab launch --nproc-per-node 2 spec.toml
  resnetlab launch --nproc-per-node 2 --resume 3 spec.toml   # continue from epoch 3's checkpoint
  resnetlab launch --nproc-per-node 1 --nnodes 2 --node-rank 0 --master-addr node0 spec.toml   # on node0
  resnetlab launch --nproc-per-node 1 --nnodes 2 --node-rank 1 --master-addr node0 spec.toml   # on node1
`

const evalUsage = `Usage: resnetlab eval -c DIR [-e E|E@S] [--dataset NAME] [--data DIR] [--device NAME] [--batch N] [--spec SPEC]

Loads model_E.pth (model_E-stepS.pth for -e E@S) from the checkpoint
directory DIR and prints its accuracy on the test set, overall and per class:
  Accuracy of the model on the test images: 85.12 %

Flags:
  -c, --checkpoint DIR   checkpoint directory (required)
  -e, --epoch E          the checkpoint of epoch E's end (default: the latest
                         complete one)
  -e, --epoch E@S        ... or the mid-epoch one S steps into epoch E (the
                         c key's or Ctrl-C's), as run --resume takes it
  --dataset NAME         cifar10, fashion-mnist or synthetic
                         (default: the one the checkpoint was trained on;
                         another one is scored, with a note saying so)
  --data DIR             data set root (default: $DATA, else ./data)
  --device NAME          auto, cpu or cuda (default auto)
  --batch N              evaluation batch size (default 128, as the reference)
  --spec SPEC            take the data set settings from this spec
                         (needed for synthetic data: sizes and seed)

Examples:
  resnetlab eval -c ./checkpoint/zero/gemini-fp16-1 -e 80
  resnetlab eval -c ./checkpoint/smoke/torch_ddp-fp32-1 --spec experiments/smoke.toml
`

const dataUsage = `Usage: resnetlab data fetch NAME [--root DIR]

Fetches a data set and checks its digest. NAME is cifar10 (the binary
version, cifar-10-binary.tar.gz, downloaded: needs internet access) or
fashion-mnist (from Debian's dataset-fashion-mnist package: used where it
lies, or copied into --root DIR; without the package it says how to get
it). A fetch that fails removes what it created. The synthetic data set needs no
fetch.

Flags:
  --root DIR   where to put it (default: $DATA, else ./data)

Examples:
  resnetlab data fetch cifar10
  resnetlab data fetch fashion-mnist --root /datasets
`

const compareUsage = `Usage: resnetlab compare FILE|DIR...

Prints finished runs side by side: plugin, precision, ranks, data set, epochs,
final and best test accuracy, mean epoch time, throughput, peak device memory
per rank and status. Arguments are result files written by 'resnetlab run', or
directories whose *.json files are read.

Examples:
  resnetlab compare results/*.json
  resnetlab compare results/
`
