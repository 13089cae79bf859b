// The DNS module: see docs/architecture.md.
