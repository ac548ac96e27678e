"""The release registry (content-addressed snapshots, slots, history) and the release merge."""
