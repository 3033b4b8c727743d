"""Where each core CLI command lives. Imported lazily, so `treegrpo tail` does not import torch.
Add a line here to register a core command; the target must exist. Commands a service brings
(`treegrpo sft`, the learner's) and the services themselves register by entry points in their own
distributions (`treegrpo/plugins.py`).

COMMANDS: name -> ("module:attr", help) where attr is a typer.Typer (a command group) or a function.
"""

COMMANDS: dict[str, tuple[str, str]] = {
    # name: (target, help)
    "archive": ("treegrpo.archive.cli:app", "Export a run as the seed's data root, or import one"),
    "report": ("treegrpo.report.cli:report", "The capability report of one or more runs"),
    "model": ("treegrpo.models.cli:model_app", "Build a small local model and tokenizer (no hub)"),
    "run": ("treegrpo.runner.cli:run", "Run the whole loop: embedded NATS, four services, export, report"),
    "demo": ("treegrpo.runner.cli:demo", "The embedded default end to end (what `make demo` runs)"),
}
