"""Where each CLI command and each service lives. Imported lazily, so `treegrpo tail` does not
import torch. Add a line here to register a command; the target must exist.

COMMANDS: name -> "module:attr" where attr is a typer.Typer (a command group) or a function (one command).
SERVICES: name -> "module:Class" where Class subclasses treegrpo.service.Service and has a
`config_cls` attribute (its pydantic-settings config).
CONFIGS: name -> "module:Class" of that same config class, so reading a run file's sections does
not import the services themselves (the learner's pulls in torch: ~1 s); a test checks each equals
its service's `config_cls`.
"""

COMMANDS: dict[str, tuple[str, str]] = {
    # name: (target, help)
    "archive": ("treegrpo.archive.cli:app", "Export a run as the seed's data root, or import one"),
    "report": ("treegrpo.report.cli:report", "The capability report of one or more runs"),
    "model": ("treegrpo.models.cli:model_app", "Build a small local model and tokenizer (no hub)"),
    "sft": (
        "treegrpo.services.learner.sft.cli:sft",
        "Supervised fine-tuning of the policy (seed corpus or archive)",
    ),
    "run": ("treegrpo.runner.cli:run", "Run the whole loop: embedded NATS, four services, export, report"),
    "demo": ("treegrpo.runner.cli:demo", "The embedded default end to end (what `make demo` runs)"),
}

SERVICES: dict[str, str] = {
    "sampler": "treegrpo.services.sampler.service:SamplerService",
    "executor": "treegrpo.services.executor.service:ExecutorService",
    "grader": "treegrpo.services.grader.service:GraderService",
    "learner": "treegrpo.services.learner.service:LearnerService",
}

CONFIGS: dict[str, str] = {
    "sampler": "treegrpo.services.sampler.config:SamplerConfig",
    "executor": "treegrpo.services.executor.config:ExecutorConfig",
    "grader": "treegrpo.services.grader.config:GraderConfig",
    "learner": "treegrpo.services.learner.config:LearnerConfig",
}
