"""treegrpo: tree search + GRPO for machine-learning-engineering agents, as event-sourced services
on NATS JetStream. The layering (which package may import which) is in docs/ARCHITECTURE.md and is
checked by import-linter (`make lint`, tests/unit/test_import_layers.py)."""
