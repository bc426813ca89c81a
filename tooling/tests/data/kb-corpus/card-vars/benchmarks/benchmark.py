"""Present so that the card's `has_benchmark` is true (kernel-builder's rule)."""
