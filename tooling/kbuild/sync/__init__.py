"""`kbuild sync`: bringing a kernel's files up to its upstream repository (upstream.yaml)."""
