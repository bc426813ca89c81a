"""What a kernel is: build.toml's schema and manifest, the backend registry, variants and their
archs, the build's inputs and the CI matrix. Reads files; builds, renders and publishes nothing."""
