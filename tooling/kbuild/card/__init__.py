"""The kernel card: what CARD.md shows, rendered in a sandboxed child process."""
