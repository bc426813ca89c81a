"""`kbuild check`: the source checks of a kernel and the links of its card."""
