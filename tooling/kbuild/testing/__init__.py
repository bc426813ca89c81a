"""Testing a kernel against its fresh build: `kbuild test` and kbuild's pytest plugins."""
