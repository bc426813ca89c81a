"""kbuild's base: errors, paths kept inside a folder, git, locks, redacted output, child environments,
Hub ids and findings. Knows nothing of kernels; every other package builds on it."""
