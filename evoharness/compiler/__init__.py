"""Config in, a content-hashed HarnessVariant out, and everything that runs one (runtime, simulator, workloads, release)."""
