"""``robopin models …``: list the supported models, fetch weights into a local folder, serve one with vLLM.

    robopin models list
    robopin models show robopin-4b --vlm-config          # the planner's `vlm` parameter for it
    robopin models fetch robopin-4b                      # hub -> $ROBOPIN_MODELS_DIR/robopin-4b
    robopin models fetch robopin-4b --from /mnt/usb/robopin-4b   # no internet on this machine
    robopin models serve robopin-4b                      # print the vLLM command; --run to run it
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

import yaml

__all__ = ["register"]


def _registry(args: argparse.Namespace):
    from robopin.models import load_registry

    return load_registry(args.registry)


def _models_dir(args: argparse.Namespace) -> Path:
    from robopin.models import default_models_dir

    return Path(args.models_dir) if args.models_dir else default_models_dir()


def _list(args: argparse.Namespace) -> int:
    from robopin.models import IncompleteModelError, check_model_folder

    registry = _registry(args)
    models_dir = _models_dir(args)
    print(f"{'name':28} {'kind':9} {'points':15} {'min GPU':>8}  {'local':7} source")
    for spec in registry:
        local = "-"
        if spec.kind == "hub":
            try:
                check_model_folder(models_dir / spec.name)
                local = "yes"
            except IncompleteModelError:
                local = "no"
        source = spec.hub_id if spec.kind == "hub" else spec.base_url
        memory = f"{spec.min_gpu_gb:.0f} GB" if spec.kind == "hub" else "-"
        print(f"{spec.name:28} {spec.kind:9} {spec.point_convention:15} {memory:>8}  {local:7} {source}")
    print(f"(models folder: {models_dir})")
    return 0


def _show(args: argparse.Namespace) -> int:
    spec = _registry(args)[args.name]
    if args.vlm_config:
        block = {"vlm": spec.vlm_config(args.base_url), "reasoning": spec.reasoning_config()}
        print(yaml.safe_dump(block, sort_keys=False).rstrip())
        return 0
    lines = {
        "name": spec.name,
        "description": spec.description,
        "kind": spec.kind,
        "source": f"{spec.hub_id}@{spec.revision}" if spec.kind == "hub" else spec.base_url,
        "architecture": spec.architecture or "-",
        "point convention": spec.point_convention,
        "answer format": spec.answer_format,
        "prompt template": spec.prompt_template,
    }
    if spec.kind == "hub":
        lines["memory"] = (
            f"weights {spec.weights_gb:.1f} GB ({spec.parameters_b:g} B parameters, {spec.serve.dtype}); "
            f"plan for >= {spec.min_gpu_gb:g} GB of GPU memory"
        )
    if spec.notes:
        lines["notes"] = spec.notes
    for key, value in lines.items():
        print(f"{key + ':':18} {value}")
    print()
    print(_request_text(spec, args.instruction, [v.strip() for v in args.views.split(",") if v.strip()]))
    return 0


def _request_text(spec, instruction: str, views: list[str]) -> str:
    """The pointing request the reasoning loop sends this model, built by the loop's own code."""
    import numpy as np

    from robopin.pincot.prompts import View
    from robopin.reasoning.config import ReasoningConfig
    from robopin.reasoning.errors import ReasoningConfigError
    from robopin.reasoning.prompting import pointing_request
    from robopin.vlm.base import ViewImage

    try:
        config = ReasoningConfig.from_dict(spec.reasoning_config())
    except ReasoningConfigError as error:
        return f"request: not built by the reasoning loop: {error}"
    width, height = 640, 480  # RoboPIN's cameras (L515 and D435 colour at 640x480)
    images = [ViewImage(np.zeros((height, width, 3), np.uint8), name, k) for k, name in enumerate(views)]
    request = pointing_request(config, spec.point_convention, instruction, [View(v) for v in views], images)
    lines = [f"request ({request.template} template, {len(views)} view(s) at {width}x{height}):"]
    for message in request.messages:
        parts = []
        for part in message.parts:
            if isinstance(part, ViewImage):
                parts.append(f"[image {part.img_idx}: {part.name} {part.width}x{part.height}]")
            else:
                parts.append(str(part))
        lines.append(f"  {message.role}: " + "\n    ".join(" ".join(parts).splitlines()))
    return "\n".join(lines)


def _fetch(args: argparse.Namespace) -> int:
    from robopin.models import ModelError, fetch_model

    spec = _registry(args)[args.name]
    try:
        result = fetch_model(
            spec,
            _models_dir(args),
            source_dir=args.source,
            offline=args.offline,
            endpoint=args.endpoint,
            token=os.environ.get("HF_TOKEN") or None,
            force=args.force,
        )
    except ModelError as error:
        print(f"robopin models fetch: {error}", file=sys.stderr)
        return 1
    state = "already present" if result.already_present else f"fetched from {result.source}"
    print(f"{result.name}: {state} at {result.path} ({result.files} files, {result.bytes / 1e9:.2f} GB)")
    return 0


def _serve(args: argparse.Namespace) -> int:
    from robopin.models import ModelError, check_model_folder, vllm_arguments
    from robopin.models.registry import shell_join

    spec = _registry(args)[args.name]
    model_path: Path | None = None
    try:
        if spec.kind == "hub" and not args.from_hub:
            model_path = _models_dir(args) / spec.name
            check_model_folder(model_path)
        command = [
            "vllm",
            "serve",
            *vllm_arguments(
                spec,
                model_path,
                host=args.host,
                port=args.port,
                tensor_parallel_size=args.tensor_parallel_size,
                gpu_memory_utilization=args.gpu_memory_utilization,
            ),
        ]
    except ModelError as error:
        hint = f" (fetch it first: robopin models fetch {spec.name}, or serve straight from the hub with --from-hub)"
        print(f"robopin models serve: {error}{hint if model_path is not None else ''}", file=sys.stderr)
        return 1
    if not args.run:
        print(shell_join(command))
        return 0
    executable = shutil.which("vllm")
    if executable is None:
        print(
            "robopin models serve: `vllm` is not installed here. Run it in the compose `vllm` service "
            "(docker/compose.yaml) or a venv of its own (it pins its own torch; never install it into the stack's "
            "venv), or drop --run and paste the printed command there.",
            file=sys.stderr,
        )
        return 1
    os.execv(executable, command)  # replaces this process: signals reach vLLM directly
    return 0  # pragma: no cover - execv does not return


def register(subparsers) -> None:
    """Add ``robopin models`` with list, show, fetch and serve."""
    parser = subparsers.add_parser("models", help="supported VLMs: list, show, fetch weights, serve with vLLM")
    parser.add_argument(
        "--registry", default=None, help="registry YAML (default: $ROBOPIN_MODEL_REGISTRY or models/registry.yaml)"
    )
    parser.add_argument(
        "--models-dir", default=None, help="local models folder (default: $ROBOPIN_MODELS_DIR or models/weights)"
    )
    actions = parser.add_subparsers(dest="models_command", metavar="ACTION", required=True)

    list_parser = actions.add_parser("list", help="every registered model and whether it is in the models folder")
    list_parser.set_defaults(func=_list)

    show = actions.add_parser("show", help="one model's facts, or --vlm-config for the planner")
    show.add_argument("name")
    show.add_argument("--vlm-config", action="store_true", help="print the planner's `vlm` parameter (YAML)")
    show.add_argument("--base-url", default=None, help="server URL for --vlm-config (default: http://127.0.0.1:8000/v1)")
    show.add_argument(
        "--instruction",
        default="Pick up the duck in front of two toys and place it to the middle plate among plates.",
        help="the instruction of the request shown (default: RoboPIN's spatial task)",
    )
    show.add_argument("--views", default="static,wrist", help="camera views of the request, in img_idx order")
    show.set_defaults(func=_show)

    fetch = actions.add_parser("fetch", help="download a model into the models folder (or copy it with --from)")
    fetch.add_argument("name")
    fetch.add_argument(
        "--from", dest="source", default=None, metavar="FOLDER", help="copy from this folder, not the hub"
    )
    fetch.add_argument("--offline", action="store_true", help="use only the hub cache in the models folder")
    fetch.add_argument("--endpoint", default=None, help="hub mirror URL (default: huggingface_hub's, or HF_ENDPOINT)")
    fetch.add_argument("--force", action="store_true", help="fetch again even if a complete copy is there")
    fetch.set_defaults(func=_fetch)

    serve = actions.add_parser("serve", help="print (or --run) the vLLM command serving a model")
    serve.add_argument("name")
    serve.add_argument("--host", default="0.0.0.0")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--tensor-parallel-size", type=int, default=None)
    serve.add_argument("--gpu-memory-utilization", type=float, default=None)
    serve.add_argument("--from-hub", action="store_true", help="let vLLM download the hub id itself")
    serve.add_argument("--run", action="store_true", help="exec vllm instead of printing the command")
    serve.set_defaults(func=_serve)
